"""Start-up of a Parquet stream of many tiny files on loopback S3 (moto) against an MDS dataset of
the same shard count: the Parquet start lists the files (their sizes with them) and reads every
file's footer (one ranged GET per file, on 32 threads), the MDS start one index.json; then the
same Parquet stream once `streaming parquet-index` has published its index beside the files (one
GET, no footer read at start; each footer comes with its file's first row group).

    .venv/bin/python benchmarks/parquet_scale.py                  # 2,000 files
    .venv/bin/python benchmarks/parquet_scale.py --files 10000    # the issue's scale

Printed: seconds to build each dataset with a fresh cache folder (and to read its first sample),
median of --rounds, the time publishing the index took, and the ratios Parquet / MDS (the goal:
under 2). Uploading the files to moto takes most of the run's time and is not measured.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _targets import S3Target

from streaming import StreamingDataset
from streaming.cache.prepare.parquet_footers import select_files
from streaming.cache.prepare.published_index import publish
from streaming.stream import Stream
from writers.mds import MDSWriter

ROWS = 20  # rows per tiny file (one row group)


def tiny_parquet(k: int) -> bytes:
    """File `k`: ROWS rows, ids k * ROWS upward, one row group."""
    ids = list(range(k * ROWS, (k + 1) * ROWS))
    out = io.BytesIO()
    pq.write_table(pa.table({"id": ids, "text": [f"row {i}" for i in ids]}), out)
    return out.getvalue()


def mds_index(files: int, folder: Path) -> Path:
    """An MDS dataset of about `files` shards of ROWS samples."""
    with MDSWriter(columns={"id": "int", "text": "str"}, out=str(folder),
                   size_limit=ROWS * 36) as writer:
        for i in range(files * ROWS):
            writer.write({"id": i, "text": f"row {i:06d}"})
    return folder / "index.json"


def start(stream: Stream) -> tuple[float, float]:
    """Seconds to build the dataset, and then to read its first sample."""
    t0 = time.perf_counter()
    ds = StreamingDataset(streams=[stream], batch_size=8)
    t1 = time.perf_counter()
    ds[0]
    t2 = time.perf_counter()
    ds.close()
    return t1 - t0, t2 - t1


def server_rate(target: S3Target, files: int, requests: int = 1000) -> float:
    """Ranged GETs per second the server answers on 32 threads (of the files' last 1 KiB, as
    footer reads ask): the floor of the Parquet start, whatever the client does."""
    keys = [f"pq/part-{k % files:06d}.parquet" for k in range(requests)]
    t = time.perf_counter()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda key: target.client.get_object(Bucket="bench", Key=key,
                                                           Range="bytes=-1024")["Body"].read(),
                      keys))
    return requests / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    target = S3Target()
    os.environ.update(target.env)
    root = Path(tempfile.mkdtemp(prefix="bench-parquet-scale-"))
    try:
        mds_index(args.files, root / "mds")
        shards = len(list((root / "mds").glob("shard.*")))
        t = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: target.put(p, f"mds/{p.name}"),
                          sorted((root / "mds").iterdir())))
            list(pool.map(lambda k: target.client.put_object(
                Bucket="bench", Key=f"pq/part-{k:06d}.parquet", Body=tiny_parquet(k)),
                range(args.files)))
        print(f"{args.files} Parquet files and {shards} MDS shards uploaded in "
              f"{time.perf_counter() - t:.0f} s")
        rate = server_rate(target, args.files)
        print(f"  the server answers {rate:.0f} ranged GETs/s on 32 threads: {args.files} footer "
              f"reads take at least {args.files / rate:.2f} s")
        runs: dict[str, list[tuple[float, float]]] = {"mds": [], "parquet": [], "published": []}

        def measure(kinds: list[str]) -> None:
            for r in range(args.rounds):
                for kind in kinds:
                    cache = root / f"cache-{kind}-{r}"
                    fmt = {} if kind == "mds" else {"format": "parquet"}
                    runs[kind].append(start(Stream(remote=target.url("mds" if kind == "mds"
                                                                     else "pq"),
                                                   local=cache, **fmt)))
                    shutil.rmtree(cache, ignore_errors=True)

        measure(["mds", "parquet"])
        t = time.perf_counter()
        url, _ = publish(select_files(target.url("pq")), None, timeout=60, retry=2)
        print(f"  streaming parquet-index wrote {url} in {time.perf_counter() - t:.2f} s")
        measure(["mds", "published"])
        med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v))
               for k, v in runs.items()}
        for kind, (build, first) in med.items():
            print(f"  {kind:9s} build {build:7.2f} s  first sample {first:6.2f} s")
        for kind in ("parquet", "published"):
            print(f"  {kind} / MDS start (build + first sample): "
                  f"x{sum(med[kind]) / sum(med['mds']):.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        target.stop()


if __name__ == "__main__":
    main()
