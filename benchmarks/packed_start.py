"""Start-up of packed and token-weighted datasets over S3: seconds to construct them on a fresh
node, with their sample-length side files (one per shard) and their streams' index.json files
fetched at once (the default: up to `streaming.dataset.lengths.SIDE_FETCHES` and
`streaming.dataset.catalog.INDEX_FETCHES` in flight) against one after the other, in the same
run.

    .venv/bin/python benchmarks/packed_start.py [--shards 64 256] [--streams 8 32]
                                                [--delay 0.05] [--rounds 3]

Rows:
- `packed, N shards`: `PackedStreamingDataset(remote=...)` over one stream of N
  shards, each with its side file (`MDSWriter(lengths="tokens")`);
- `packed, N shards, scanned`: the same samples written without side files (as the reference
  writes them), so every shard is downloaded and scanned (`SCAN_AT_ONCE` of them at once, or
  one by one); then, once, the time `streaming lengths` takes to record them in place (4
  shards at once, its default);
- `token mix, K streams`: `StreamingDataset(streams=..., mix_unit="tokens")` over K streams of
  4 shards each, with proportions.

The data lives on a loopback moto S3 server behind the test suite's fault proxy, which answers
every request after `--delay` seconds (a store's time to first byte, which loopback does not
have). Shards are tiny (20 samples), so the time is the requests'. Each construction runs in a
fresh process with fresh cache folders (imports done before the clock starts); the two ways
take turns in each round and the medians and their ratio are printed. Prints only; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from _delayed_s3 import delayed_s3  # noqa: E402

CHILD = r"""
import sys, tempfile, time
from streaming import PackedStreamingDataset, Stream, StreamingDataset
from streaming.dataset import catalog
from streaming.dataset import lengths
kind, count, one_by_one = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if one_by_one:
    catalog.INDEX_FETCHES = lengths.SIDE_FETCHES = lengths.SCAN_AT_ONCE = 1
root = tempfile.mkdtemp()
t0 = time.perf_counter()
if kind in ("packed", "plain"):
    ds = PackedStreamingDataset(remote=f"s3://bench/{kind}{count}", local=f"{root}/p",
                                batch_size=4, packing_length=256)
else:
    ds = StreamingDataset(streams=[Stream(remote=f"s3://bench/mix/s{k}", local=f"{root}/s{k}",
                                          proportion=1 + k % 3) for k in range(count)],
                          mix_unit="tokens", batch_size=4)
print(time.perf_counter() - t0)
"""

WAYS = ("one by one", "at once")
SAMPLES_PER_SHARD = 20


def write(folder: Path, shards: int, start: int, lengths: str | None = "tokens") -> None:
    import numpy as np

    from writers.mds import MDSWriter

    rng = np.random.default_rng(start)
    with MDSWriter(columns={"tokens": "ndarray:int32"}, out=str(folder), lengths=lengths,
                   size_limit=SAMPLES_PER_SHARD * 410) as writer:
        for _ in range(shards * SAMPLES_PER_SHARD):
            writer.write({"tokens": np.zeros(int(rng.integers(90, 100)), np.int32)})


def upload(client, prefix: str, folder: Path) -> None:
    for path in folder.iterdir():
        client.upload_file(str(path), "bench", f"{prefix}/{path.name}")


def construct(env: dict, kind: str, count: int, way: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(count),
                          "1" if way == "one by one" else "0"], env=env, capture_output=True,
                         text=True, timeout=1200, check=True)
    return float(out.stdout.strip().splitlines()[-1])


RECORD = r"""
import sys, time
from streaming.packing.record_lengths import record_lengths
t0 = time.perf_counter()
record_lengths(f"s3://bench/plain{sys.argv[1]}", "tokens")
print(time.perf_counter() - t0)
"""


def record(env: dict, shards: int) -> float:
    out = subprocess.run([sys.executable, "-c", RECORD, str(shards)], env=env,
                         capture_output=True, text=True, timeout=1200, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, nargs="*", default=[64, 256])
    p.add_argument("--streams", type=int, nargs="*", default=[8, 32])
    p.add_argument("--delay", type=float, default=0.05, help="seconds per request")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    from streaming.dataset.catalog import INDEX_FETCHES
    from streaming.dataset.lengths import SIDE_FETCHES

    with delayed_s3(args.delay) as (client, env):
        with tempfile.TemporaryDirectory() as tmp:
            for shards in args.shards:
                write(Path(tmp) / f"packed{shards}", shards, shards)
                upload(client, f"packed{shards}", Path(tmp) / f"packed{shards}")
                write(Path(tmp) / f"plain{shards}", shards, shards, lengths=None)
                upload(client, f"plain{shards}", Path(tmp) / f"plain{shards}")
            for k in range(max(args.streams, default=0)):
                write(Path(tmp) / f"s{k}", 4, 1000 + k)
                upload(client, f"mix/s{k}", Path(tmp) / f"s{k}")
        print(f"{args.delay * 1e3:.0f} ms per request; medians of {args.rounds} rounds, seconds "
              f"to construct the dataset; at once: up to {SIDE_FETCHES} side files and "
              f"{INDEX_FETCHES} indexes in flight")
        print(f"{'dataset':<28}" + "".join(f" {way:>11}" for way in WAYS)
              + "  at once / one by one")
        rows = [("packed", n, f"packed, {n} shards") for n in args.shards]
        rows += [("plain", n, f"packed, {n} shards, scanned") for n in args.shards]
        rows += [("mix", n, f"token mix, {n} streams") for n in args.streams]
        for kind, count, label in rows:
            times: dict[str, list[float]] = {way: [] for way in WAYS}
            for r in range(args.rounds):
                for way in (WAYS if r % 2 == 0 else WAYS[::-1]):
                    times[way].append(construct(env, kind, count, way))
            alone, together = (statistics.median(times[way]) for way in WAYS)
            print(f"{label:<28} {alone:>10.3f}s {together:>10.3f}s  x{together / alone:.2f}",
                  flush=True)
        for shards in args.shards:  # last: it changes the scanned rows' datasets
            took = record(env, shards)
            print(f"streaming lengths over the {shards} shards (once): {took:.3f}s", flush=True)


if __name__ == "__main__":
    main()
