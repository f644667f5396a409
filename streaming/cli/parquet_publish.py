"""`streaming parquet-index LOCATION [--columns a,b]`: read the footers of a folder, prefix or glob
of Parquet files once, and publish the index they give beside them, so that each node of a run
starts from that one file instead of one request per file."""

from __future__ import annotations

import argparse

from streaming.cli._common import add_command

EXAMPLES = """
  streaming parquet-index s3://bucket/corpus/                     # every *.parquet below it
  streaming parquet-index 's3://bucket/corpus/*/part-*.parquet'   # a glob (quoted)
  streaming parquet-index s3://bucket/corpus/ --columns text,tokens   # a projection
"""


def register(sub) -> None:
    p = add_command(sub, "parquet-index", "Publish the index of a folder of Parquet files "
                    "beside them (_streaming_parquet_index.json), read from their footers once, "
                    "so a Parquet stream starts without reading a footer.", EXAMPLES)
    p.add_argument("location", help="a folder, prefix or glob of Parquet files (path or URL)")
    p.add_argument("--columns", type=lambda text: text.split(","), default=None,
                   help="the columns streams will read, comma separated (default all); a "
                        "stream with another projection reads the footers instead")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    p.add_argument("--retry", type=int, default=2, help="extra attempts per request")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.cache.prepare.parquet_footers import select_files
    from streaming.cache.prepare.published_index import publish

    url, published = publish(select_files(args.location), args.columns, timeout=args.timeout,
                             retry=args.retry)
    print(f"wrote {url}: {published.files} Parquet files, {published.row_groups} row groups"
          + ("" if args.columns is None else f", columns {','.join(args.columns)}"))
    return 0
