"""One shuffled epoch of Hugging Face `datasets` streaming the same Parquet files, run by
benchmarks/parquet.py in the `hf` venv of benchmarks/peers/setup.sh (never in ours).

    .bench-venvs/hf/bin/python benchmarks/peers/hf_parquet_epoch.py FOLDER --workers 2
    .bench-venvs/hf/bin/python benchmarks/peers/hf_parquet_epoch.py s3://bucket/prefix

Streams `FOLDER/*.parquet` (`load_dataset("parquet", ..., streaming=True)`), shuffled with a
buffer of --buffer samples (its own way to shuffle a stream), through torch's DataLoader with
batch 64; prints one JSON object: samples, seconds, first (seconds to the first batch, counted
from before `load_dataset`, its import done first as for the other systems). An s3:// URL is
read through fsspec's s3fs, an S3-compatible endpoint (--endpoint, default $S3_ENDPOINT_URL)
given as `storage_options={"endpoint_url": ...}`; the credentials come from the AWS_*
environment variables.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def ids(samples: list[dict]) -> list[int]:
    """A batch as its ids (the columns are not collated: the loop only counts them)."""
    return [int(sample["id"]) for sample in samples]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--buffer", type=int, default=10_000)
    parser.add_argument("--endpoint", default=os.environ.get("S3_ENDPOINT_URL"),
                        help="an S3-compatible endpoint for s3:// URLs")
    args = parser.parse_args()
    remote = args.folder.startswith("s3://")
    options = {"endpoint_url": args.endpoint} if remote and args.endpoint else None
    from datasets import load_dataset
    from torch.utils.data import DataLoader

    start = time.perf_counter()
    stream = load_dataset("parquet", data_files=f"{args.folder}/*.parquet", split="train",
                          streaming=True, storage_options=options)
    stream = stream.shuffle(seed=0, buffer_size=args.buffer)
    loader = DataLoader(stream, batch_size=args.batch, num_workers=args.workers,
                        collate_fn=ids)
    samples, first = 0, None
    for batch in loader:
        if first is None:
            first = time.perf_counter() - start
        samples += len(batch)
    seconds = time.perf_counter() - start
    print(json.dumps({"samples": samples, "seconds": seconds, "first": first or seconds}))


if __name__ == "__main__":
    main()
