"""Unpacking zstd shards into the cache as a fresh-cache first batch does: two shards at once (64
MiB and 13 MiB raw by default, as in benchmarks/first_batch.py), each on its own preparing thread,
timed until both raw files are written. Each shard decoded and written in one loop (libzstd's
copy_stream, `decompress_file`) against decoded on one thread while the preparing thread writes
(`streaming.cache.prepare.zstd_unpack`), with the decode alone (nothing written) as the ceiling,
all in one run.

    .venv/bin/python benchmarks/unpack.py [--mib 64 13] [--rounds 25]
    .venv/bin/python benchmarks/unpack.py --first-batch bench-data/first_batch/tokens-20000/zstd

`--first-batch DATASET` times what a user sees instead: a fresh process from constructing a
shuffled StreamingDataset over that local zstd dataset (fresh cache, 0 workers, batch 64) to
its first batch, with large shards unpacked on two threads and, alternating, with the
threshold raised so that every shard takes the one loop.

The shards are token-like data (small integers, zstd-3), written to a temporary folder on the
same disk as the repository. The three ways take turns each round; the medians and the
ratios to the one-loop time are printed. Prints only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import zstandard

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]


def packed_shard(folder: Path, mib: int, k: int) -> tuple[Path, int]:
    """Shard `k`: a zstd file of `mib` MiB of raw token-like bytes, and its raw size."""
    rng = np.random.default_rng(k)
    raw = rng.zipf(1.3, (mib << 20) // 4).clip(0, 50_000).astype(np.uint32).tobytes()
    path = folder / f"shard.{k:05d}.mds.zstd"
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw))
    return path, len(raw)


def copied_shards(dataset: Path, folder: Path) -> list[tuple[Path, int]]:
    """The zstd shards of the MDS dataset at `dataset`, copied into `folder`, with raw sizes."""
    shards = []
    for entry in json.loads((dataset / "index.json").read_text())["shards"]:
        src = dataset / entry["zip_data"]["basename"]
        copy = folder / src.name
        shutil.copyfile(src, copy)
        shards.append((copy, int(entry["raw_data"]["bytes"])))
    return shards


def decode_only(src: Path) -> None:
    """The ceiling: the same decode, nothing written."""
    with open(src, "rb") as handle:
        reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
        while reader.read(1 << 20):
            pass


def all_at_once(unpack: Callable[[Path, Path, int], object], shards: list[tuple[Path, int]]
                ) -> float:
    """Seconds until every shard is unpacked, each on its own thread."""
    started = time.perf_counter()
    with ThreadPoolExecutor(len(shards)) as pool:
        list(pool.map(lambda shard: unpack(shard[0], shard[0].with_suffix(""), shard[1]),
                      shards))
    seconds = time.perf_counter() - started
    for src, _ in shards:
        src.with_suffix("").unlink(missing_ok=True)
    return seconds


FIRST_BATCH = r"""
import shutil, sys, tempfile, time
from streaming import StreamingDataLoader, StreamingDataset
import streaming.cache.prepare.preparer as prepare
if sys.argv[2] == "one-loop":
    prepare.UNPACK_FROM = 1 << 62
local = tempfile.mkdtemp(prefix="unpack-bench-")
started = time.perf_counter()
ds = StreamingDataset(remote=sys.argv[1], local=local, batch_size=64, shuffle=True)
next(iter(StreamingDataLoader(ds, batch_size=64, num_workers=0)))
print(time.perf_counter() - started)
ds.close()
shutil.rmtree(local)
"""


def first_batch(dataset: Path, rounds: int) -> None:
    """Seconds to a fresh-cache first batch, each way in its own process, alternated."""
    times: dict[str, list[float]] = {"two threads": [], "one-loop": []}
    for r in range(rounds):
        for way in (list(times) if r % 2 == 0 else list(times)[::-1]):
            out = subprocess.run([sys.executable, "-c", FIRST_BATCH, str(dataset.resolve()), way],
                                 capture_output=True, text=True, check=True, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
            times[way].append(float(out.stdout.strip().splitlines()[-1]))
    base = statistics.median(times["one-loop"])
    print(f"fresh-cache first batch over {dataset}, median of {rounds} alternated runs")
    for way, values in times.items():
        median = statistics.median(values)
        print(f"  {way:<12} {median:7.3f} s  x{median / base:.2f} of one loop")


def main() -> None:
    from streaming.cache.prepare.zstd_unpack import unpack_zstd
    from streaming.format.compression import decompress_file

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, nargs="+", default=[64, 13])
    p.add_argument("--rounds", type=int, default=25)
    p.add_argument("--dataset", type=Path, default=None,
                   help="unpack this MDS dataset's zstd shards instead (e.g. the corpus "
                        "benchmarks/first_batch.py writes under bench-data/)")
    p.add_argument("--first-batch", type=Path, default=None, metavar="DATASET")
    args = p.parse_args()
    if args.first_batch:
        first_batch(args.first_batch, args.rounds)
        return
    with tempfile.TemporaryDirectory(dir=REPO) as tmp:
        shards = (copied_shards(args.dataset, Path(tmp)) if args.dataset else
                  [packed_shard(Path(tmp), mib, k) for k, mib in enumerate(args.mib)])
        ways: dict[str, Callable[[Path, Path, int], object]] = {
            "one loop (decompress_file)": lambda src, dst, size: decompress_file(
                src, dst, "zstd", expected_size=size, durable=False),
            "two threads (unpack_zstd)": unpack_zstd,
            "decode only (ceiling)": lambda src, dst, size: decode_only(src),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, unpack in ways.items():
                times[name].append(all_at_once(unpack, shards))
        base = statistics.median(times["one loop (decompress_file)"])
        sizes = ", ".join(f"{size / 2**20:.0f} MiB" for _, size in shards)
        print(f"shards of {sizes} raw, unpacked at once; median of {args.rounds} rounds")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:<28} {median:7.3f} s  x{median / base:.2f} of one loop")


if __name__ == "__main__":
    main()
