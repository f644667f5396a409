"""Cluster-scale figures: one node's epoch plan per batching method and for packing's pack count,
at 10M / 100M / 1B samples on 8 / 128 / 1,024 nodes, and building a catalog of 10k / 100k / 1M
shards. Every case runs in a fresh subprocess (peak RSS is that case's ru_maxrss, under a 6 GiB
address-space cap) and is printed as a ratio against a baseline measured in the same run.

    .venv/bin/python benchmarks/scale.py            # the full table (minutes)
    .venv/bin/python benchmarks/scale.py --quick    # 10M samples on 128 nodes, 10k shards

Simulated: the plan is the asking node's (node N/2 of N, 8 ranks x 8 DataLoader workers, batch
32, py1e, 50k-sample shards split evenly over 2 streams, or 8 where the table says so); nothing
else of the cluster runs. Baselines: the `random` method's plan for the same case, and as the
floor an `np.argsort` of as many random ids as the node serves. Packing counts the node's 8 ranks'
packs (best_fit, packing_length 8192, sequence lengths hashed from the sample id) after planning
them with `random`; the exchange of the counts between nodes is timed separately with that many
TCPStore clients on loopback. The catalog case writes an index.json of N shards (1,000 samples,
64 MiB each) and times reading it into a catalog (index parse and checks, shard facts, the
sample-to-shard locator; with the cache's origin check against an unchanged index) against a
bare `json.loads` of the same file, for one index and for 10k streams of 100 shards. Prints
only.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METHODS = ("random", "stratified", "per_stream", "device_per_stream")
SHARD = 50_000
CAP = 6 * 2**30
GIB = 2**30


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _config(kind: str, total: int, streams: int):
    from streaming.plan import PlanConfig

    sizes = np.full(total // SHARD, SHARD, dtype=np.int64)
    per = np.full(streams, len(sizes) // streams, dtype=np.int64)
    per[-1] += len(sizes) - per.sum()
    method = "random" if kind == "pack" else kind
    return PlanConfig(sizes, per, batch_size=32, shuffle=True, shuffle_algo="py1e",
                      batching_method=method)


def _world(nodes: int):
    from streaming.plan import World

    return World(num_nodes=nodes, ranks_per_node=8, workers_per_rank=8, node=nodes // 2)


def _hashed_lengths(ids: np.ndarray) -> np.ndarray:
    """Sequence lengths 64..4159 drawn from a hash of each sample id."""
    mixed = (ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(52)
    return (64 + mixed).astype(np.int64)


def child_plan(kind: str, total: int, nodes: int, streams: int, repeat: int) -> dict:
    """One node's plan (or pack count, or the argsort floor) in this fresh process, the best
    time of `repeat` runs."""
    best = min(_plan_once(kind, total, nodes, streams) for _ in range(repeat))
    return {"seconds": best, "rss": _peak()}


def _plan_once(kind: str, total: int, nodes: int, streams: int) -> float:
    from streaming.packing import pack_lengths
    from streaming.packing.equal import node_most_packs
    from streaming.plan import plan_node

    world = _world(nodes)
    start = time.perf_counter()
    if kind == "floor":
        ids = np.random.default_rng(0).integers(0, total, size=total // nodes)
        start = time.perf_counter()
        np.argsort(ids)
    elif kind == "pack":
        plan = plan_node(_config(kind, total, streams), world, 0)

        def count(rank) -> int:
            ids = plan.ids[rank.rank_in_node].reshape(-1)
            return len(pack_lengths(_hashed_lengths(ids[ids >= 0]), 8192))

        node_most_packs(count, world, world.node)
    else:
        plan_node(_config(kind, total, streams), world, 0)
    return time.perf_counter() - start


def _shard_entry(i: int) -> str:
    return ('{"column_encodings": ["str", "int"], "column_names": ["text", "x"], '
            '"column_sizes": [null, 8], "compression": null, "format": "mds", "hashes": '
            f'["xxh64"], "raw_data": {{"basename": "shard.{i:07d}.mds", "bytes": 67108864, '
            f'"hashes": {{"xxh64": "{i:016x}"}}}}, "samples": 1000, "size_limit": 67108864, '
            '"version": 2, "zip_data": null}')


def _write_index(path: Path, shards: int) -> None:
    with path.open("w") as out:
        out.write('{"shards": [')
        for lo in range(0, shards, 10_000):
            hi = min(shards, lo + 10_000)
            out.write(", ".join(_shard_entry(i) for i in range(lo, hi)))
            out.write(", " if hi < shards else "")
        out.write('], "version": 2}')


def child_catalog(kind: str, shards: int, streams: int = 1) -> dict:
    """Read `streams` indexes of `shards` shards each into catalog arrays (or just json.loads
    them, the floor); `origin` adds the cache's origin check against an unchanged index."""
    from streaming.cache.shard_facts import ShardFacts
    from streaming.format.index import read_index
    from streaming.read.sample_locator import SampleLocator

    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"s{s}" / "index.json" for s in range(streams)]
        for path in paths:
            path.parent.mkdir()
            _write_index(path, shards)
        base = _peak()
        start = time.perf_counter()
        if kind == "floor":
            for path in paths:
                json.loads(path.read_bytes())
        else:
            indexes = [read_index(path) for path in paths]
            ShardFacts.from_indexes(indexes)
            SampleLocator(np.concatenate([ix.samples_per_shard for ix in indexes]))
            if kind == "origin":
                from streaming.cache.folder.changed_files import stale_files

                for path, index in zip(paths, indexes):
                    stale_files(read_index(path), index)
        return {"seconds": time.perf_counter() - start, "rss": _peak(), "base": base}


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run(args: list[str], timeout: float) -> dict | None:
    """One case in a fresh, capped subprocess; None (with the reason printed) if it failed."""
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                              text=True, timeout=timeout, preexec_fn=_cap, cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"    {' '.join(args)}: over {timeout:.0f} s, stopped")
        return None
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"    {' '.join(args)}: failed ({tail[:120]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ratio(value: dict | None, base: dict | None, key: str) -> str:
    if value is None or base is None:
        return "-"
    return f"x{value[key] / max(base[key], 1e-9):.2f}"


def _cell(r: dict | None) -> str:
    return "-" if r is None else f"{r['seconds']:.2f} s, {r['rss'] / GIB:.2f} GiB"


def child_exchange(nodes: int) -> dict:
    """`nodes` TCPStore clients on loopback swapping one pack count each."""
    from benchmarks.pack_count import swap_seconds

    return {"seconds": swap_seconds(nodes), "rss": _peak()}


def plan_table(sizes: list[int], node_counts: list[int], streams: int, timeout: float,
               repeat: int) -> None:
    print(f"\n| samples, nodes ({streams} streams) | case | one node | time vs random | "
          "memory vs random | time vs argsort floor |")
    print("| --- | --- | --- | --- | --- | --- |")
    for total in sizes:
        for nodes in node_counts:
            where = f"{total / 1e6:,.0f}M, {nodes}"
            case = [str(total), str(nodes), str(streams), str(repeat)]
            floor = run(["plan", "floor", *case], timeout)
            base = run(["plan", "random", *case], timeout)
            rows = [("random", base)]
            rows += [(kind, run(["plan", kind, *case], timeout))
                     for kind in (*METHODS[1:], "pack")]
            for kind, r in rows:
                print(f"| {where} | {kind} | {_cell(r)} | {_ratio(r, base, 'seconds')} | "
                      f"{_ratio(r, base, 'rss')} | {_ratio(r, floor, 'seconds')} |", flush=True)
            print(f"| {where} | argsort floor | {_cell(floor)} | | | |", flush=True)


def catalog_table(cases: list[tuple[int, int]], timeout: float) -> None:
    print("\n| shards (streams x shards) | catalog build | time vs json.loads | "
          "memory vs json.loads | with origin check | time vs json.loads |")
    print("| --- | --- | --- | --- | --- | --- |")
    for streams, shards in cases:
        case = [str(shards), str(streams)]
        floor = run(["catalog", "floor", *case], timeout)
        built = run(["catalog", "build", *case], timeout)
        checked = run(["catalog", "origin", *case], timeout)
        label = f"{streams * shards:,}" + (f" ({streams:,} x {shards})" if streams > 1 else "")
        print(f"| {label} | {_cell(built)} | {_ratio(built, floor, 'seconds')} | "
              f"{_ratio(built, floor, 'rss')} | {_cell(checked)} | "
              f"{_ratio(checked, floor, 'seconds')} |", flush=True)


def exchange_table(node_counts: list[int], timeout: float) -> None:
    print("\n| nodes | pack-count exchange (wall) |")
    print("| --- | --- |")
    for nodes in node_counts:
        r = run(["exchange", str(nodes)], timeout)
        wall = "-" if r is None else f"{r['seconds'] * 1000:.0f} ms"
        print(f"| {nodes} | {wall} |", flush=True)


def _child(argv: list[str]) -> None:
    kind, rest = argv[0], argv[1:]
    if kind == "plan":
        out = child_plan(rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[4]))
    elif kind == "catalog":
        out = child_catalog(rest[0], int(rest[1]), int(rest[2]))
    else:
        out = child_exchange(int(rest[0]))
    print(json.dumps(out))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10M samples, 10k shards only")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per case")
    parser.add_argument("--repeat", type=int, default=2, help="plans timed per case (best)")
    parser.add_argument("--sizes", default="10000000,100000000,1000000000",
                        help="samples per epoch (comma-separated)")
    parser.add_argument("--nodes", default="8,128,1024", help="node counts (comma-separated)")
    parser.add_argument("--only", choices=("plan", "catalog", "exchange"), default=None)
    parser.add_argument("--shards", default="10000,100000,1000000",
                        help="catalog: shards of one index (comma-separated)")
    parser.add_argument("--streams", type=int, default=10_000,
                        help="catalog: streams of 100 shards (0: none)")
    args = parser.parse_args()
    if args.quick:
        plan_table([10_000_000], [128], 2, args.timeout, args.repeat)
        catalog_table([(1, 10_000)], args.timeout)
        exchange_table([8], args.timeout)
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    nodes = [int(x) for x in args.nodes.split(",")]
    if args.only in (None, "plan"):
        plan_table(sizes, nodes, 2, args.timeout, args.repeat)
        plan_table(sizes[-1:], [128], 8, args.timeout, args.repeat)
    if args.only in (None, "catalog"):
        cases = [(1, int(x)) for x in args.shards.split(",") if x]
        catalog_table(cases + ([(args.streams, 100)] if args.streams else []), args.timeout)
    if args.only in (None, "exchange"):
        exchange_table([8, 128], args.timeout)


if __name__ == "__main__":
    main()
