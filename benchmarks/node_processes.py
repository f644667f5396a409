"""A node's processes and a node's start-up at cluster scale, each against a baseline measured in
the same run.

memory: one node of 8 ranks x 8 DataLoader workers (72 processes), each rank its own interpreter
started with the launcher variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), over a
tiny file:// dataset. Once every worker has delivered a batch, every process's
/proc/<pid>/smaps_rollup is read: the node's total PSS (what the node really uses; shared pages
counted once) and USS (private pages: what one more process adds), against one idle
interpreter that imported torch and streaming.

startup: seconds from `StreamingDataset(...)` to the first batch for one rank of node 97 of a
128-node x 8-rank job (only that process runs), against rank 0 of a 1-node x 8-rank job over
the same dataset, each in a fresh interpreter with an empty cache. `--profile` prints the
128-node start-up's cProfile.

lengths: CPU of a node's 8 ranks each building the dataset and asking len() (what a trainer
does first), against one of them alone.

limited: one node of 8 ranks x 8 workers (64 readers sharing the node's cache) over a file://
zstd dataset of many small shards, one epoch with cache_limit at 25% of the dataset against
the same epoch with no limit, alternated, each in a fresh cache: what sharing a limit costs
the node's readers (the node lock taken to reserve room, the horizons consulted, the shards
downloaded again). The ranks all-reduce after every batch, as data-parallel training does
(`--free-ranks`: they read freely and drift apart). Timed from the moment every worker has
its first batch.

    .venv/bin/python benchmarks/node_processes.py                # both
    .venv/bin/python benchmarks/node_processes.py startup --samples 20000000 --profile
    .venv/bin/python benchmarks/node_processes.py startup --batching stratified
    .venv/bin/python benchmarks/node_processes.py lengths --samples 10000000
    .venv/bin/python benchmarks/node_processes.py limited --tiny 40000 --rounds 2

Prints only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RANK_SCRIPT = Path(__file__).with_name("_node_rank.py")
READY_TIMEOUT = 900.0
MB = 1 << 20


# ----- memory of one node ----------------------------------------------------------------------
def rollup(pid: int) -> dict[str, int]:
    """Rss, Pss and Uss (private clean + dirty) of `pid` in bytes, from smaps_rollup."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    uss = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return {"rss": fields.get("Rss", 0), "pss": fields.get("Pss", 0), "uss": uss}


def children(pid: int) -> list[int]:
    """The direct children of `pid` (every thread's list)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(c) for c in text)
    return out


def write_tiny(folder: Path, samples: int) -> None:
    from streaming import MDSWriter

    with MDSWriter(columns={"id": "int", "payload": "ndarray:int32"}, out=str(folder),
                   size_limit=1 << 14, compression="zstd") as w:
        for i in range(samples):
            w.write({"id": i, "payload": np.full(16, i, dtype=np.int32)})


def launch_node(work: Path, remote: str, ranks: int, workers: int, *, cache: str = "cache",
                limit: int | None = None, sync: bool = False) -> list[subprocess.Popen]:
    for stale in ("go", *(f"ready{r}" for r in range(ranks))):
        (work / stale).unlink(missing_ok=True)
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT="29999",
                   TORCHELASTIC_RUN_ID=work.name, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        cmd = [sys.executable, str(RANK_SCRIPT), "--remote", remote, "--local",
               str(work / cache), "--workers", str(workers), "--ready",
               str(work / f"ready{rank}"), "--go", str(work / "go"), "--out",
               str(work / f"out{rank}"), *(["--cache-limit", str(limit)] if limit else []),
               *(["--sync"] if sync else [])]
        with open(work / f"err{rank}", "w") as err:
            procs.append(subprocess.Popen(cmd, env=env, stderr=err))
    return procs


def wait_ready(work: Path, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not all((work / f"ready{r}").exists() for r in range(len(procs))):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            failed = [r for r, p in enumerate(procs) if p.returncode not in (None, -9)]
            detail = "".join((work / f"err{r}").read_text()[-2000:] for r in failed[:1])
            raise SystemExit(f"the node's ranks did not all reach their first batch; ranks "
                             f"{failed} exited:\n{detail}")
        time.sleep(0.2)


def idle_interpreter() -> dict[str, int]:
    """The footprint of one interpreter that imported torch and streaming and waits."""
    proc = subprocess.Popen([sys.executable, "-c", "import torch, streaming, sys; "
                             "print('up', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    try:
        return rollup(proc.pid)
    finally:
        proc.communicate("", timeout=60)


def memory(ranks: int, workers: int, samples: int) -> None:
    base = idle_interpreter()
    with tempfile.TemporaryDirectory(prefix="node-mem-") as tmp:
        work = Path(tmp)
        write_tiny(work / "data", samples)
        procs = launch_node(work, f"file://{work / 'data'}", ranks, workers)
        wait_ready(work, procs)
        rank_mem = [rollup(p.pid) for p in procs]
        families = [[rollup(c) for c in children(p.pid)] for p in procs]
        worker_mem = [m for family in families for m in family]
        (work / "go").write_text("go")
        for p in procs:
            p.wait(timeout=READY_TIMEOUT)
        read = sum(json.loads((work / f"out{r}").read_text())["samples"] for r in range(ranks))
    every = rank_mem + worker_mem
    total_pss = sum(m["pss"] for m in every)
    print(f"memory: 1 node, {ranks} ranks x {workers} workers: {len(rank_mem)} ranks + "
          f"{len(worker_mem)} workers alive, {read} samples read of {samples}")
    print(f"  node total PSS {total_pss / MB:8.1f} MiB  "
          f"= x{total_pss / base['pss']:.1f} one idle interpreter "
          f"(torch + streaming imported: PSS {base['pss'] / MB:.1f} MiB, "
          f"USS {base['uss'] / MB:.1f} MiB)")
    print(f"  node total USS {sum(m['uss'] for m in every) / MB:8.1f} MiB   (sum of RSS, which "
          f"counts shared pages once per process: {sum(m['rss'] for m in every) / MB:.1f} MiB)")
    rank_pss = [m["pss"] + sum(w["pss"] for w in family) for m, family in zip(rank_mem, families)]
    print(f"  per rank with its {workers} workers: PSS {np.mean(rank_pss) / MB:6.1f} MiB")
    for name, group in (("rank", rank_mem), ("worker", worker_mem)):
        uss = np.array([m["uss"] for m in group]) / MB
        pss = np.array([m["pss"] for m in group]) / MB
        print(f"  per {name:<6}: USS mean {uss.mean():6.1f} MiB (min {uss.min():.1f}, max "
              f"{uss.max():.1f}) = x{uss.mean() * MB / base['uss']:.2f} idle USS; "
              f"PSS mean {pss.mean():6.1f} MiB")


# ----- a node's readers under a cache limit -----------------------------------------------------
def limited_epoch(work: Path, remote: str, ranks: int, workers: int, cache: str,
                  limit: int | None, sync: bool) -> dict[str, float]:
    """Seconds from the moment every worker of the node has its first batch to the end of the
    epoch, and the node cache's downloads and evictions."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = launch_node(work, remote, ranks, workers, cache=cache, limit=limit, sync=sync)
    wait_ready(work, procs)
    start = time.perf_counter()
    (work / "go").write_text("go")
    for p in procs:
        p.wait(timeout=READY_TIMEOUT)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    outs = [json.loads((work / f"out{r}").read_text()) for r in range(ranks)]
    return {"seconds": seconds, "cpu": cpu, "samples": sum(o["samples"] for o in outs),
            "downloads": max(o["downloads"] for o in outs),
            "evictions": max(o["evictions"] for o in outs),
            "needed": max(o["needed"] for o in outs),
            "misses": max(o["misses"] for o in outs), "wait": max(o["wait"] for o in outs),
            "warned": float(any("still needed" in (work / f"err{r}").read_text()
                                for r in range(ranks)))}


def limited(ranks: int, workers: int, samples: int, rounds: int, share: float,
            sync: bool) -> None:
    """One node's epoch with its cache limited to `share` of the dataset against the same epoch
    unlimited, alternated in fresh caches: what the node's readers pay for sharing a limit
    (the node lock they take to reserve room, the horizons they consult, the downloads the
    limit forces again). With `sync` the ranks all-reduce after every batch, as data-parallel
    training does; without, each reads as fast as it can and they drift apart."""
    runs: dict[str, list[dict[str, float]]] = {"unlimited": [], "limited": []}
    with tempfile.TemporaryDirectory(prefix="node-limit-") as tmp:
        work = Path(tmp)
        write_tiny(work / "data", samples)
        index = json.loads((work / "data" / "index.json").read_text())
        raw = sum(int(s["raw_data"]["bytes"]) for s in index["shards"])
        limit = int(raw * share)
        for r in range(rounds):
            order = ("unlimited", "limited") if r % 2 == 0 else ("limited", "unlimited")
            for label in order:
                runs[label].append(limited_epoch(
                    work, f"file://{work / 'data'}", ranks, workers, f"cache-{label}-{r}",
                    limit if label == "limited" else None, sync))
    print(f"limited: 1 node, {ranks} ranks x {workers} workers, {samples:,} samples in "
          f"{len(index['shards'])} zstd shards ({raw / MB:.1f} MiB raw), cache_limit "
          f"{share:.0%} ({limit / MB:.2f} MiB) against none, ranks "
          f"{'all-reducing after every batch' if sync else 'reading freely'}; median of "
          f"{rounds}, seconds from every worker's first batch to the epoch's end")
    med = {k: {f: float(np.median([x[f] for x in v])) for f in v[0]} for k, v in runs.items()}
    for label, m in med.items():
        print(f"  {label:<9} {m['seconds']:7.2f} s  CPU {m['cpu']:7.1f} s  "
              f"{m['samples']:,.0f} samples  "
              f"{m['downloads']:,.0f} downloads  {m['evictions']:,.0f} evictions "
              f"({m['needed']:,.0f} still needed)  {m['misses']:,.0f} waits for a shard  "
              f"{m['wait']:,.1f} s waiting"
              f"{'  (the node warned that its limit is too small)' if m['warned'] else ''}")
    print(f"  limited / unlimited: x{med['limited']['seconds'] / med['unlimited']['seconds']:.2f}"
          f" wall, x{med['limited']['cpu'] / med['unlimited']['cpu']:.2f} CPU (the whole node's, "
          "start-up included)")


# ----- start-up at scale -----------------------------------------------------------------------
def write_replicated(folder: Path, shards: int, per_shard: int) -> None:
    """`shards` copies (hard links) of one shard of `per_shard` samples under one index."""
    from streaming import MDSWriter

    one = folder / "one"
    with MDSWriter(columns={"id": "int"}, out=str(one), size_limit=1 << 30) as w:
        for i in range(per_shard):
            w.write({"id": i})
    index = json.loads((one / "index.json").read_text())
    entry = index["shards"][0]
    entries = []
    for k in range(shards):
        name = f"shard.{k:05}.mds"
        os.link(one / entry["raw_data"]["basename"], folder / name)
        entries.append({**entry, "raw_data": {**entry["raw_data"], "basename": name}})
    (folder / "index.json").write_text(json.dumps({**index, "shards": entries}))
    shutil.rmtree(one)


STARTUP_CHILD = """
import cProfile, json, pstats, sys, time
from streaming import StreamingDataLoader, StreamingDataset
from streaming.plan import World
remote, local, nodes, node, profile, batching = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
    int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6]
def start():
    t0 = time.perf_counter()
    ds = StreamingDataset(remote=remote, local=local, batch_size=32, shuffle=True,
                          batching_method=batching, world=World(nodes, 8, 1, node, 0))
    built = time.perf_counter() - t0
    next(iter(StreamingDataLoader(ds, batch_size=32, num_workers=0)))
    first = time.perf_counter() - t0
    ds.close()
    return built, first
if profile:
    prof = cProfile.Profile()
    built, first = prof.runcall(start)
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
else:
    built, first = start()
print(json.dumps({"built": built, "first": first}))
"""


def startup_once(remote: str, local: Path, nodes: int, node: int, profile: bool,
                 batching: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", STARTUP_CHILD, remote, str(local), str(nodes), str(node),
         "1" if profile else "0", batching], check=True, stdout=subprocess.PIPE,
        stderr=None if profile else subprocess.DEVNULL, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return json.loads(out.stdout.strip().splitlines()[-1])


def startup(samples: int, per_shard: int, rounds: int, profile: bool, batching: str) -> None:
    shards = max(samples // per_shard, 1)
    with tempfile.TemporaryDirectory(prefix="node-start-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        write_replicated(data, shards, per_shard)
        remote = f"file://{data}"
        runs: dict[str, list[dict]] = {"1 node": [], "node 97 of 128": []}
        for r in range(rounds):
            for label, nodes, node in (("1 node", 1, 0), ("node 97 of 128", 128, 97)):
                local = Path(tmp) / f"cache-{label.replace(' ', '')}-{r}"
                runs[label].append(startup_once(remote, local, nodes, node, False, batching))
        if profile:
            startup_once(remote, Path(tmp) / "cache-profile", 128, 97, True, batching)
    print(f"startup: {shards * per_shard:,} samples in {shards} shards, 8 ranks per node, "
          f"batch 32, shuffled, {batching} batching, fresh interpreter and empty cache each, "
          f"median of {rounds}")
    med = {k: {f: float(np.median([x[f] for x in v])) for f in ("built", "first")}
           for k, v in runs.items()}
    for label, m in med.items():
        print(f"  {label:<15} StreamingDataset() {m['built']:6.3f} s   to first batch "
              f"{m['first']:6.3f} s")
    ratio = med["node 97 of 128"]["first"] / med["1 node"]["first"]
    print(f"  node 97 of 128 / 1 node, to first batch: x{ratio:.3f} "
          f"(its share of the epoch: x{1 / 128:.4f})")


def ranks_asking_len(remote: str, local: Path, ranks: int, running: int) -> float:
    """CPU seconds for `running` of a node's `ranks` (forks of this process) to build the
    dataset and ask len(), each with a fresh cache of its own."""
    import resource

    from streaming import StreamingDataset

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    pids = []
    for rank in range(running):
        pid = os.fork()
        if pid == 0:
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
                              LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                              MASTER_PORT="1", TORCHELASTIC_RUN_ID=local.name)
            ds = StreamingDataset(remote=remote, local=str(local), batch_size=32, shuffle=True)
            len(ds)
            ds.close()
            os._exit(0)
        pids.append(pid)
    if any(os.waitpid(pid, 0)[1] for pid in pids):
        raise SystemExit("a rank failed")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def lengths(samples: int, per_shard: int, ranks: int) -> None:
    import torch  # noqa: F401  (imported before forking, as in every rank)

    with tempfile.TemporaryDirectory(prefix="node-len-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        write_replicated(data, max(samples // per_shard, 1), per_shard)
        one = ranks_asking_len(f"file://{data}", Path(tmp) / "one", ranks, 1)
        every = ranks_asking_len(f"file://{data}", Path(tmp) / "every", ranks, ranks)
    print(f"len() on 1 node: {samples:,} samples; CPU of all {ranks} ranks {every:.1f} s "
          f"= x{every / one:.2f} one rank alone ({one:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="?",
                        choices=["memory", "startup", "lengths", "limited", "both"],
                        default="both")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tiny", type=int, default=4096, help="samples of the memory run")
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--per-shard", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--batching", default="random")
    parser.add_argument("--share", type=float, default=0.25, help="cache_limit of the limited run")
    parser.add_argument("--free-ranks", action="store_true",
                        help="limited: ranks read without a collective per batch")
    args = parser.parse_args()
    if args.what in ("memory", "both"):
        memory(args.ranks, args.workers, args.tiny)
    if args.what in ("startup", "both"):
        startup(args.samples, args.per_shard, args.rounds, args.profile, args.batching)
    if args.what == "lengths":
        lengths(args.samples, args.per_shard, args.ranks)
    if args.what == "limited":
        limited(args.ranks, args.workers, args.tiny, args.rounds, args.share,
                not args.free_ranks)


if __name__ == "__main__":
    main()
