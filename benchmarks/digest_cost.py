"""What checking downloads against the index's xxh64 digests costs a cold epoch: the same
samples written twice (with an xxh64 digest per file, and without any), read cold into a fresh
cache folder in turns, in the same run. Reports the median epoch time of each, their ratio,
and the median of the per-round ratios (steadier on a shared machine).

    .venv/bin/python benchmarks/digest_cost.py [--mb 64] [--rounds 5]

Two remotes: a folder on this machine with raw shards (the fastest transport, so the largest
share for the check: every shard is copied, then hashed) and a loopback S3 server (moto) with
zstd shards (the check hashes the bytes as they stream in).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streaming import StreamingDataset
from tests.support.s3server import start_s3_server
from writers.mds import MDSWriter

MB = 1 << 20
SAMPLE = 64 << 10


def write(out: Path, mb: int, hashes: list[str], compression: str | None) -> None:
    """`mb` MB of half-compressible 64 KiB samples."""
    rng = np.random.default_rng(0)
    with MDSWriter(columns={"id": "int", "tokens": "bytes"}, out=str(out), hashes=hashes,
                   compression=compression, size_limit=8 * MB) as writer:
        for i in range(mb * MB // SAMPLE):
            writer.write({"id": i, "tokens": rng.integers(0, 16, SAMPLE, np.uint8).tobytes()})


def cold_epoch(remote: str, scratch: Path) -> tuple[float, float]:
    """Wall and CPU seconds (this process) of one epoch read into a fresh cache folder, in
    order."""
    cache = Path(tempfile.mkdtemp(dir=scratch))
    cpu = time.process_time()
    start = time.perf_counter()
    ds = StreamingDataset(remote=remote, local=str(cache), batch_size=1)
    try:
        count = sum(1 for _ in ds)
    finally:
        ds.close()
    took, used = time.perf_counter() - start, time.process_time() - cpu
    assert count == ds.num_samples
    shutil.rmtree(cache)
    return took, used


def compare(name: str, remotes: dict[str, str], rounds: int, scratch: Path) -> None:
    times: dict[str, list[float]] = {label: [] for label in remotes}
    cpu: dict[str, list[float]] = {label: [] for label in remotes}
    for _ in range(rounds):
        for label, remote in remotes.items():
            wall, used = cold_epoch(remote, scratch)
            times[label].append(wall)
            cpu[label].append(used)
    checked, plain = (statistics.median(times[k]) for k in ("xxh64", "none"))
    paired = statistics.median(a / b for a, b in zip(times["xxh64"], times["none"]))
    cpu_checked, cpu_plain = (statistics.median(cpu[k]) for k in ("xxh64", "none"))
    print(f"{name}: cold epoch median {checked:.3f} s with xxh64 checks, {plain:.3f} s without "
          f"(ratio of medians {checked / plain:.3f}, median of round ratios {paired:.3f}); "
          f"reader CPU {cpu_checked:.3f} s against {cpu_plain:.3f} s "
          f"(ratio {cpu_checked / cpu_plain:.3f}); wall runs: "
          + "; ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in times.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="dataset size (raw)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="digest-cost-"))
    server = None
    try:
        folders = {}
        for label, hashes in (("xxh64", ["xxh64"]), ("none", [])):
            for codec in (None, "zstd"):
                folders[label, codec] = scratch / f"{label}-{codec or 'raw'}"
                write(folders[label, codec], args.mb, hashes, codec)
        compare("folder remote, raw shards",
                {k: str(folders[k, None]) for k in ("xxh64", "none")}, args.rounds, scratch)
        server = start_s3_server()
        os.environ.update(server.env())
        client, bucket = server.client(), server.make_bucket()
        for (label, codec), folder in folders.items():
            if codec:
                for path in sorted(folder.iterdir()):
                    client.upload_file(str(path), bucket, f"{label}/{path.name}")
        compare("S3 (moto) remote, zstd shards",
                {k: f"s3://{bucket}/{k}" for k in ("xxh64", "none")}, args.rounds, scratch)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
