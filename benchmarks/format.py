"""Benchmark the MDS write and local read paths against the reference and the machine's ceilings.

    .venv/bin/python benchmarks/format.py            # ~1 GB token corpus (cached in bench-data/)
    .venv/bin/python benchmarks/format.py --quick    # ~80 MB, a few seconds
    .venv/bin/python benchmarks/format.py --corpus blobs

Prints write MB/s (raw and zstd), LocalDataset sequential and random-access speed, and in the
same run the ceilings (page-cache read of the shard files, one-thread zstd (de)compression), plus
ratios against the reference implementation's figures measured on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import BENCH_DATA, Corpus, blob_corpus, token_corpus

from streaming.dataset.local_dataset import LocalDataset
from streaming.format.index import read_index
from writers.mds import MDSWriter

# mosaicml-streaming 0.13's published figures on this machine (see docs/performance.md).
REFERENCE = {"raw_write_mbs": 170.0, "zstd_write_mbs": 75.0, "random_p50_us": 24.0}
MB = 1 << 20
REFERENCE_PY = Path(__file__).resolve().parent.parent / ".bench-venvs/reference/bin/python"

# Runs inside the reference venv on the same cached corpus: its writer, then its LocalDataset.
REFERENCE_RUN = """
import json, random, shutil, sys, time
import numpy as np
from streaming import LocalDataset, MDSWriter
corpus, out, reads = sys.argv[1], sys.argv[2], int(sys.argv[3])
values = np.asarray(np.load(corpus + "/values.npy", mmap_mode="r"))
offsets = np.load(corpus + "/offsets.npy").tolist()
texts = json.load(open(corpus + "/texts.json"))
samples = [{"id": i, "text": texts[i], "tokens": values[offsets[i]:offsets[i + 1]]}
           for i in range(len(texts))]
result = {}
for name in ("raw", "zstd"):
    shutil.rmtree(out + name, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    with MDSWriter(columns={"id": "int", "text": "str", "tokens": "ndarray:int32"},
                   out=out + name, compression=None if name == "raw" else "zstd") as writer:
        for sample in samples:
            writer.write(sample)
    result[name] = [time.perf_counter() - start, time.process_time() - cpu]
ds = LocalDataset(out + "raw")
for i in range(len(ds)):
    ds[i]
ids = random.Random(0).choices(range(len(ds)), k=reads)
lat = []
for i in ids:
    t = time.perf_counter_ns()
    ds[i]
    lat.append(time.perf_counter_ns() - t)
result["random_us"] = [float(np.percentile(lat, 50)) / 1000, float(np.percentile(lat, 99)) / 1000]
print(json.dumps(result))
"""


def write(corpus: Corpus, out: Path, compression: str | None) -> tuple[float, float, int]:
    """Write the corpus; return (wall seconds, CPU seconds of all threads, raw shard bytes)."""
    samples = corpus.samples_in_memory()  # so corpus slicing is not timed
    shutil.rmtree(out, ignore_errors=True)  # nor freeing the previous run's files
    start, cpu = time.perf_counter(), time.process_time()
    with MDSWriter(columns=corpus.columns, out=out, compression=compression, exist_ok=True) as w:
        for sample in samples:
            w.write(sample)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return seconds, cpu, int(np.sum(read_index(out / "index.json").raw_bytes))


def sequential_read(ds: LocalDataset) -> float:
    """Seconds to iterate over every sample in order (decoding every column)."""
    start = time.perf_counter()
    for _ in ds:
        pass
    return time.perf_counter() - start


def random_access(ds: LocalDataset, count: int) -> np.ndarray:
    """Per-call latency in microseconds of ds[i] for random i (all shards already open)."""
    ids = random.Random(0).choices(range(len(ds)), k=count)
    clock = time.perf_counter_ns
    out = np.empty(count, dtype=np.float64)
    for n, i in enumerate(ids):
        t = clock()
        ds[i]
        out[n] = clock() - t
    return out / 1000.0


def _read_all(paths: list[Path], buffer: bytearray) -> int:
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            total += f.readinto(buffer)
    return total


def page_cache_read(paths: list[Path]) -> float:
    """MB/s of reading the files with readinto, after a warm-up pass puts them in page cache."""
    buffer = bytearray(max(p.stat().st_size for p in paths))
    _read_all(paths, buffer)
    start = time.perf_counter()
    total = _read_all(paths, buffer)
    return total / MB / (time.perf_counter() - start)


def zstd_ceilings(raw_paths: list[Path], level: int = 3) -> tuple[float, float]:
    """One-thread zstd compress and decompress MB/s over the raw shard bytes."""
    data = [p.read_bytes() for p in raw_paths]
    size = sum(map(len, data)) / MB
    start = time.perf_counter()
    packed = [zstandard.ZstdCompressor(level=level).compress(d) for d in data]
    compress = size / (time.perf_counter() - start)
    unpack = zstandard.ZstdDecompressor()
    start = time.perf_counter()
    for blob in packed:
        unpack.decompress(blob)
    return compress, size / (time.perf_counter() - start)


def reference_run(corpus: Corpus, out: Path, reads: int) -> dict | None:
    """The reference implementation on the same corpus in the same run, or None if absent."""
    if not REFERENCE_PY.exists() or corpus.texts is None or corpus.folder is None:
        return None
    # Outside the checkout, with no PYTHONPATH, so `streaming` is the reference's package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = [str(REFERENCE_PY), "-c", REFERENCE_RUN, str(corpus.folder), str(out), str(reads)]
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=out.parent,
                          timeout=3600)
    if done.returncode:
        print(f"reference run failed: {done.stderr.strip()[-400:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpus (~80 MB)")
    parser.add_argument("--corpus", choices=["tokens", "blobs"], default="tokens")
    parser.add_argument("--random-reads", type=int, default=100_000)
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the same-run reference measurement (.bench-venvs/reference)")
    args = parser.parse_args()

    if args.corpus == "tokens":
        corpus = token_corpus(samples=20_000 if args.quick else 250_000)
    else:
        corpus = blob_corpus(samples=800 if args.quick else 10_000)
    print(f"corpus: {len(corpus):,} samples, {corpus.nbytes / MB:,.0f} MB of {args.corpus}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    root = BENCH_DATA / "format" / f"{args.corpus}-{len(corpus)}"

    raw_s, raw_cpu, raw_bytes = write(corpus, root / "raw", None)
    zstd_s, zstd_cpu, _ = write(corpus, root / "zstd", "zstd")
    raw_mbs, zstd_mbs = raw_bytes / MB / raw_s, raw_bytes / MB / zstd_s
    shard_paths = sorted((root / "raw").glob("shard.*.mds"))
    zip_bytes = sum(p.stat().st_size for p in (root / "zstd").glob("shard.*.mds.zstd"))

    ds = LocalDataset(root / "raw")
    seq_s = sequential_read(ds)  # also opens every shard for the random-access pass
    lat = random_access(ds, min(args.random_reads, 20 * len(ds)))
    p50, p99 = np.percentile(lat, [50, 99])
    read_ceiling = page_cache_read(shard_paths)
    zc, zd = zstd_ceilings(shard_paths[:8])

    rows = [
        (
            "write raw",
            f"{raw_mbs:8.1f} MB/s",
            f"x{raw_mbs / REFERENCE['raw_write_mbs']:.2f} ref; "
            f"{raw_bytes / MB / raw_cpu:.0f} MB per CPU-second",
        ),
        (
            "write zstd",
            f"{zstd_mbs:8.1f} MB/s",
            f"x{zstd_mbs / REFERENCE['zstd_write_mbs']:.2f} ref (target x2.00); "
            f"{raw_bytes / MB / zstd_cpu:.0f} MB per CPU-second",
        ),
        (
            "zstd write vs serial",
            f"{zstd_mbs * (1 / raw_mbs + 1 / zc):8.2f} x",
            "serial = raw write then one-thread compress, as the reference does (same run)",
        ),
        ("zstd ratio", f"{raw_bytes / max(zip_bytes, 1):8.2f}", ""),
        (
            "sequential read",
            f"{len(ds) / seq_s:8.0f} samples/s",
            f"{raw_bytes / MB / seq_s:.0f} MB/s, x{raw_bytes / MB / seq_s / read_ceiling:.2f} "
            "of page-cache read",
        ),
        (
            "random ds[i] p50",
            f"{p50:8.2f} us",
            f"x{p50 / REFERENCE['random_p50_us']:.2f} of ref latency (target <= x0.33)",
        ),
        ("random ds[i] p99", f"{p99:8.2f} us", ""),
        ("ceiling: page-cache read", f"{read_ceiling:8.0f} MB/s", ""),
        (
            "ceiling: zstd-3 compress",
            f"{zc:8.0f} MB/s",
            f"one thread; zstd write = x{zstd_mbs / zc:.2f} of it ({os.cpu_count()} cpus)",
        ),
        ("ceiling: zstd decompress", f"{zd:8.0f} MB/s", "one thread"),
    ]
    ref = None if args.no_reference else reference_run(corpus, root / "reference-", len(lat))
    if ref is not None:
        ours = {"raw": (raw_s, raw_cpu), "zstd": (zstd_s, zstd_cpu)}
        rows += _reference_rows(ref, raw_bytes, ours, p50)
    for name, value, note in rows:
        print(f"{name:<26}{value:<22}{note}")


def _reference_rows(
    ref: dict, raw_bytes: int, ours: dict[str, tuple[float, float]], p50: float
) -> list[tuple[str, str, str]]:
    """Rows comparing this run with the reference measured on the same corpus just after.

    `ours` and the reference's results map "raw"/"zstd" to (wall seconds, CPU seconds).
    """
    rows = []
    for name, target in (("raw", ""), ("zstd", " (target x2.00)")):
        (wall, cpu), (ref_wall, ref_cpu) = ours[name], ref[name]
        rows.append((
            f"reference: write {name}",
            f"{raw_bytes / MB / ref_wall:8.1f} MB/s",
            f"ours x{ref_wall / wall:.2f}{target}; ours uses x{cpu / ref_cpu:.2f} of its CPU",
        ))
    ref_p50, ref_p99 = ref["random_us"]
    return [
        *rows,
        (
            "reference: ds[i] p50/p99",
            f"{ref_p50:8.2f} us",
            f"p99 {ref_p99:.2f} us; ours x{p50 / ref_p50:.2f} of its p50 (target <= x0.33)",
        ),
    ]


if __name__ == "__main__":
    main()
