"""Convert a list of JSONL or Parquet files with LitData's `optimize`, one input per file.

Runs inside .bench-venvs/litdata (LitData writes its own chunk format):

    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_files.py FORMAT FILES.json OUT WORKERS

`fn` opens one file and yields its samples ({id, text, tokens as int32}); JSON lines are parsed
with orjson when it is installed (as our converter does), and chunks are compressed with zstd
at level 3 (our default), so both sides do the same work. Prints the wall seconds of the
`optimize` call.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

import numpy as np

try:
    from orjson import loads
except ImportError:
    loads = json.loads


def jsonl_samples(path: str):
    with open(path, "rb") as handle:
        for line in handle:
            row = loads(line)
            row["tokens"] = np.asarray(row["tokens"], dtype=np.int32)
            yield row


def parquet_samples(path: str):
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
        for row in batch.to_pylist():
            row["tokens"] = np.asarray(row["tokens"], dtype=np.int32)
            yield row


def main() -> None:
    import litdata

    fmt, listing, out, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(listing) as handle:
        files = json.load(handle)
    shutil.rmtree(out, ignore_errors=True)
    fn = jsonl_samples if fmt == "jsonl" else parquet_samples
    start = time.perf_counter()
    litdata.optimize(fn=fn, inputs=files, output_dir=out, chunk_bytes="64MB",
                     compression="zstd:3", num_workers=workers, mode="overwrite",
                     verbose=False)
    print(time.perf_counter() - start)


if __name__ == "__main__":
    main()
