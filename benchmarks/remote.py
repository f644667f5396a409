"""Benchmark a cold-cache epoch from S3 (a loopback moto server) through the cache engine.

    .venv/bin/python benchmarks/remote.py            # ~240 MB token corpus, zstd shards
    .venv/bin/python benchmarks/remote.py --quick    # ~80 MB
    .venv/bin/python benchmarks/remote.py --no-peers

Prints, in one run on the same bucket: the ceilings (parallel ranged GETs of the same objects;
fetching and decompressing them with a thread pool and nothing else),
the engine's throughput and time to first sample without and with cache_limit at 25% of the
dataset, StreamingDataset's, and mosaicml-streaming's (.bench-venvs/reference) when present.
Absolute numbers vary between machines; read the ratios to the ceiling.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import BENCH_DATA, token_corpus

from streaming.cache.engine import CacheEngine
from streaming.cache.prepare import ShardPreparer, ShardTable
from streaming.format.index import read_index
from streaming.format.shard import ShardReader
from streaming.spanner import Spanner
from streaming.stream import Stream
from tests.support.s3server import start_s3_server
from writers.mds import MDSWriter

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
SHARD_SIZE = "8mb"  # small enough that even --quick has tens of shards to pipeline
PART = 8 * MB


def build(samples: int) -> Path:
    """The zstd MDS dataset of the token corpus (written once, kept in bench-data/)."""
    out = BENCH_DATA / "remote" / f"tokens-{samples}-{SHARD_SIZE}"
    if not (out / "index.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        corpus = token_corpus(samples=samples)
        with MDSWriter(columns=corpus.columns, out=out, compression="zstd",
                       size_limit=SHARD_SIZE) as writer:
            for sample in corpus:
                writer.write(sample)
    return out


def upload(client, bucket: str, folder: Path) -> list[tuple[str, int]]:
    """Put every file under `ds/`; return (key, size) of the shard objects."""
    client.create_bucket(Bucket=bucket)
    keys = []
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), bucket, f"ds/{path.name}")
        if path.name != "index.json":
            keys.append((f"ds/{path.name}", path.stat().st_size))
    return keys


def ceiling(client, bucket: str, keys: list[tuple[str, int]], threads: int = 8) -> float:
    """MB/s of fetching every object as parallel 8 MiB range GETs (bytes to memory only)."""
    ranges = [(k, lo, min(lo + PART, size) - 1) for k, size in keys for lo in range(0, size, PART)]

    def get(item: tuple[str, int, int]) -> int:
        key, lo, hi = item
        body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={lo}-{hi}")["Body"]
        return len(body.read())

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(get, ranges))
    return total / MB / (time.perf_counter() - start)


def prepare_ceiling(remote: str, keys: list[tuple[str, int]], threads: int = 4) -> float:
    """MB/s (compressed) of fetching and decompressing every shard to disk with `threads`
    threads and no reader: the work the engine must do, without the engine."""
    from streaming.format.compression import decompress_file
    from streaming.storage import fetch

    folder = Path(tempfile.mkdtemp(prefix="bench-prep-"))

    def prepare(item: tuple[str, int]) -> int:
        key, size = item
        name = key.rsplit("/", 1)[-1]
        zipped = fetch(f"{remote}/{name}", folder / name, expected_size=size)
        decompress_file(zipped, folder / name.removesuffix(".zstd"), "zstd")
        zipped.unlink()
        return size

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(prepare, keys))
    seconds = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return total / MB / seconds


def engine_epoch(remote: str, limit: int | None, predownload: int) -> dict:
    """Read every sample once in order through one CacheEngine from a cold cache folder."""
    local = tempfile.mkdtemp(prefix="bench-cache-")
    start = time.perf_counter()
    stream = Stream(remote=remote, local=local)
    stream.apply_defaults(download_retry=2, download_timeout=60, validate_hash=None,
                          keep_zip=False)
    index = read_index(stream.index_file())
    table = ShardTable.from_indexes([index])
    codec = index.codec()
    engine = CacheEngine(ShardPreparer([stream], table), cache_limit=limit,
                         predownload=predownload, prefetch_threads=4)
    spanner = Spanner(index.samples_per_shard)
    ids = np.arange(index.num_samples)
    engine.check_plan(ids[None, None], spanner.shard_starts)  # refuses an unworkable limit
    shards, rows = spanner.locate(ids)
    engine.follow(shards)
    first = None
    current, reader = -1, None
    for k, (shard, row) in enumerate(zip(shards.tolist(), rows.tolist())):
        if shard != current:
            if reader is not None:
                reader.close()
                engine.release(current)
            reader = ShardReader(engine.acquire(shard), codec)
            current = shard
        reader.get(row)
        if first is None:
            first = time.perf_counter() - start
        if k % 64 == 0:
            engine.advance(k)
    reader.close()
    engine.release(current)
    seconds = time.perf_counter() - start
    stats = engine.stats()
    engine.close()
    shutil.rmtree(local, ignore_errors=True)
    return {"seconds": seconds, "first": first, "samples": int(index.num_samples),
            "zip_mb": float(np.sum(table.zip_bytes)) / MB, "stats": stats}


def dataset_epoch(remote: str) -> dict | None:
    """The same epoch through `streaming.StreamingDataset` (no DataLoader), if it exists."""
    try:
        from streaming import StreamingDataset
    except ImportError:
        return None
    local = tempfile.mkdtemp(prefix="bench-ds-")
    start = time.perf_counter()
    ds = StreamingDataset(remote=remote, local=local, batch_size=8)
    first, n = None, 0
    for _ in ds:
        n += 1
        if first is None:
            first = time.perf_counter() - start
    seconds = time.perf_counter() - start
    ds.close()
    shutil.rmtree(local, ignore_errors=True)
    return {"seconds": seconds, "first": first, "samples": n}


_PEER = """
import json, sys, tempfile, time
start = time.perf_counter()
from streaming import StreamingDataset
ds = StreamingDataset(remote=sys.argv[1], local=tempfile.mkdtemp(), batch_size=8)
first, n = None, 0
for _ in ds:
    n += 1
    if first is None:
        first = time.perf_counter() - start
print(json.dumps({"seconds": time.perf_counter() - start, "first": first, "samples": n}))
"""


def peer_epoch(python: Path, remote: str, env: dict) -> dict | str:
    """mosaicml-streaming on the same bucket, in its own venv (its import name is ours too)."""
    if not python.exists():
        return f"{python} not found (run benchmarks/peers/setup.sh)"
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run([str(python), "-c", _PEER, remote], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=1800)
    if done.returncode:
        return "failed: " + done.stderr.strip().splitlines()[-1]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(name: str, run: dict, zip_mb: float, top: float, work: float) -> str:
    mbs = zip_mb / run["seconds"]
    return (f"{name:<34} {run['samples'] / run['seconds']:>10,.0f} samples/s {mbs:>8.1f} MB/s "
            f"(x{mbs / top:.2f} of GETs, x{mbs / work:.2f} of fetch+decompress)  "
            f"first sample {run['first'] * 1000:>6.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpus (~80 MB)")
    parser.add_argument("--no-peers", action="store_true", help="skip mosaicml-streaming")
    parser.add_argument("--predownload", type=int, default=2048)
    args = parser.parse_args()

    folder = build(20_000 if args.quick else 60_000)
    server = start_s3_server()
    try:
        env = {**os.environ, **server.env()}
        os.environ.update(server.env())
        client = server.client()
        keys = upload(client, "bench", folder)
        zip_mb = sum(size for _, size in keys) / MB
        raw_mb = float(np.sum(read_index(folder / "index.json").raw_bytes)) / MB
        print(f"dataset: {len(keys)} zstd shards, {zip_mb:,.0f} MB in S3 "
              f"({raw_mb:,.0f} MB raw), moto server at {server.endpoint}")
        top = ceiling(client, "bench", keys)
        print(f"{'ceiling: 8 parallel range GETs':<34} {'':>20} {top:>8.1f} MB/s")
        remote = "s3://bench/ds"
        work = prepare_ceiling(remote, keys)
        print(f"{'ceiling: fetch+decompress, 4 threads':<34} {'':>20} {work:>8.1f} MB/s "
              f"(x{work / top:.2f} of GETs: CPU-bound on {os.cpu_count()} cores)")
        full = engine_epoch(remote, None, args.predownload)
        print(_row("engine, no cache_limit", full, zip_mb, top, work))
        print(f"{'':<34} {full['stats']}")
        limit = int((raw_mb + zip_mb) * MB) // 4
        quarter = engine_epoch(remote, limit, args.predownload)
        print(_row("engine, cache_limit 25%", quarter, zip_mb, top, work))
        print(f"{'':<34} {quarter['stats']}")
        ours = dataset_epoch(remote)
        if ours is not None:
            print(_row("StreamingDataset (this project)", ours, zip_mb, top, work))
        if not args.no_peers:
            peer = peer_epoch(ROOT / ".bench-venvs/reference/bin/python", remote, env)
            if isinstance(peer, dict):
                print(_row("mosaicml-streaming 0.13", peer, zip_mb, top, work))
            else:
                print(f"mosaicml-streaming 0.13: {peer}")
        print("litdata: not run (it needs its own optimized format, not MDS, on the bucket)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
