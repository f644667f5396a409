"""`streaming lengths DATASET --column C`: record the sample lengths of a dataset written
without them, so packing and token mixes read 4 bytes per sample instead of every shard."""

from __future__ import annotations

import argparse

from streaming.cli._common import add_command
from streaming.cli._progress import CommandBar, wanted

EXAMPLES = """
  streaming lengths data/corpus --column tokens           # a folder written by the reference
  streaming lengths s3://bucket/corpus --column tokens    # in place, in the object store
  streaming lengths s3://bucket/corpus --column input_ids --force   # replace another column's
"""


def register(sub) -> None:
    p = add_command(sub, "lengths", "Record the per-sample lengths of a column of a dataset "
                    "(side files plus an index.json key), in place.", EXAMPLES)
    p.add_argument("dataset", help="dataset folder or URL")
    p.add_argument("--column", required=True, help="the column whose lengths count (tokens)")
    p.add_argument("--force", action="store_true",
                   help="replace the lengths the index records for another column")
    p.add_argument("--at-once", type=int, default=None, metavar="N",
                   help="shards read at once (default 4; each needs its size in temp space)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none either when stderr is not a terminal)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.cli._common import open_index
    from streaming.packing.record_lengths import AT_ONCE, record_lengths

    total = open_index(args.dataset).num_samples if wanted(not args.no_progress) else 0
    bar = CommandBar(total, f"lengths {args.dataset}", "sample", not args.no_progress)
    try:
        done = record_lengths(args.dataset, args.column, force=args.force,
                              at_once=args.at_once or AT_ONCE, on_shard=bar.update)
    finally:
        bar.close()
    if not done.shards:
        print(f"{done.index} records the lengths of {done.column!r} already "
              f"({done.samples} samples)")
        return 0
    print(f"wrote {done.index}: lengths of {done.column!r} for {done.shards} shards, "
          f"{done.samples} samples, {done.total} in all")
    return 0
