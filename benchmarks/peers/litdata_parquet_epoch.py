"""One shuffled epoch of LitData's ParquetLoader over the same Parquet files, run by
benchmarks/parquet.py in the `litdata` venv of benchmarks/peers/setup.sh (never in ours).

    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_parquet_epoch.py FOLDER --workers 2
    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_parquet_epoch.py s3://bucket/prefix

Indexes the folder from the files' footers (`index_parquet_dataset`, not timed: a one-off step
LitData asks for first; for an s3:// URL it lists and reads the footers through s3fs and uploads
its index.json beside the files), then streams it with `StreamingDataset(item_loader=
ParquetLoader(), shuffle=True)` through LitData's StreamingDataLoader, batch 64 (workers started
with `spawn`, as LitData requires with Polars); prints one JSON object: samples, seconds, first
(seconds to the first batch, counted from before the dataset is built). An S3-compatible
endpoint (--endpoint, default $S3_ENDPOINT_URL) goes to both steps as
`storage_options={"endpoint_url": ...}`: s3fs and LitData's boto3 client both take it; the
credentials come from the AWS_* environment variables. LitData fetches the Parquet files with
obstore, built from that boto3 client's endpoint, whose HTTP client refuses a plain-http URL
unless told `allow_http`: for an http:// endpoint (the loopback server) this script adds that
one key to LitData's obstore client options, in every process (workers are spawned and import
this file again); nothing else of LitData is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def allow_plain_http() -> None:
    """Let LitData's obstore client reach an http:// S3 endpoint (it sends https only)."""
    endpoint = os.environ.get("S3_ENDPOINT_URL", "")
    if endpoint.startswith("http://"):
        from litdata.streaming import downloader

        downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True


allow_plain_http()  # at import: spawned workers run it too


def count(samples: list) -> int:
    """A batch as its size (the columns are not collated: the loop only counts them)."""
    return len(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--endpoint", default=os.environ.get("S3_ENDPOINT_URL"),
                        help="an S3-compatible endpoint for s3:// URLs")
    args = parser.parse_args()
    from litdata import StreamingDataLoader, StreamingDataset, index_parquet_dataset
    from litdata.streaming.item_loader import ParquetLoader

    remote = args.folder.startswith("s3://")
    options = {"endpoint_url": args.endpoint} if remote and args.endpoint else None
    if options:
        os.environ["S3_ENDPOINT_URL"] = args.endpoint  # for allow_plain_http in the workers
        allow_plain_http()
    index_parquet_dataset(args.folder, storage_options=options)
    start = time.perf_counter()
    ds = StreamingDataset(args.folder, item_loader=ParquetLoader(), shuffle=True,
                          cache_dir=args.cache, storage_options=options or {})
    spawn = {"multiprocessing_context": "spawn"} if args.workers else {}  # Polars needs it
    loader = StreamingDataLoader(ds, batch_size=args.batch, num_workers=args.workers,
                                 collate_fn=count, **spawn)
    samples, first = 0, None
    for batch in loader:
        if first is None:
            first = time.perf_counter() - start
        samples += batch
    seconds = time.perf_counter() - start
    print(json.dumps({"samples": samples, "seconds": seconds, "first": first or seconds}))


if __name__ == "__main__":
    main()
