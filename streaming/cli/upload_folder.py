"""`streaming upload LOCAL URL`: publish a dataset already written to a local folder."""

from __future__ import annotations

import argparse

from streaming.cli._common import UserError, add_command, human_bytes

EXAMPLES = """
  streaming upload data/corpus s3://bucket/corpus
  streaming upload data/corpus gs://bucket/corpus --exist-ok     # replace what is there
  streaming convert corpus.jsonl s3://bucket/corpus --local data/corpus   # convert and upload
"""


def register(sub) -> None:
    p = add_command(sub, "upload", "Upload a local MDS dataset folder to a remote URL "
                    "(index.json last).", EXAMPLES)
    p.add_argument("local", help="dataset folder (holding index.json)")
    p.add_argument("remote", help="destination URL: s3://, gs://, az://, file://")
    p.add_argument("--exist-ok", action="store_true",
                   help="replace a dataset already published at the URL")
    p.add_argument("--workers", type=int, default=8, help="files uploaded at once (default 8)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.errors import OutputExistsError
    from writers.upload_dataset import upload_dataset

    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    try:
        done = upload_dataset(args.local, args.remote, exist_ok=args.exist_ok,
                              progress=not args.quiet, workers=args.workers)
    except OutputExistsError as exc:
        raise UserError(f"{args.remote} already holds a dataset; pass --exist-ok to replace "
                        "it (or `streaming convert ... --append` to add to it)") from exc
    if not args.quiet:
        print(f"uploaded {done.files} files, {human_bytes(done.bytes)}, to {done.index}")
    return 0
