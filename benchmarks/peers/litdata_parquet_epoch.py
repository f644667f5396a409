"""One shuffled epoch of LitData's ParquetLoader over the same Parquet files, run by
benchmarks/parquet.py in the `litdata` venv of benchmarks/peers/setup.sh (never in ours).

    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_parquet_epoch.py FOLDER --workers 2

Indexes the folder from the files' footers (`index_parquet_dataset`, not timed: a one-off step
LitData asks for first), then streams it with `StreamingDataset(item_loader=ParquetLoader(),
shuffle=True)` through LitData's StreamingDataLoader, batch 64 (workers started with `spawn`, as
LitData requires with Polars); prints one JSON object:
samples, seconds, first (seconds to the first batch, counted from before the dataset is built).
"""

from __future__ import annotations

import argparse
import json
import time


def count(samples: list) -> int:
    """A batch as its size (the columns are not collated: the loop only counts them)."""
    return len(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cache", required=True)
    args = parser.parse_args()
    from litdata import StreamingDataLoader, StreamingDataset, index_parquet_dataset
    from litdata.streaming.item_loader import ParquetLoader

    index_parquet_dataset(args.folder)
    start = time.perf_counter()
    ds = StreamingDataset(args.folder, item_loader=ParquetLoader(), shuffle=True,
                          cache_dir=args.cache)
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
