"""`streaming convert INPUT OUT`: JSONL, CSV/TSV, Parquet or a saved HF dataset -> MDS."""

from __future__ import annotations

import argparse

from streaming.cli._common import UserError, add_command

EXAMPLES = """
  streaming convert corpus.jsonl data/corpus
  streaming convert table.csv data/table --columns id:int,price:float64 --workers 4
  streaming convert logs.tsv data/logs --compression zstd:7 --size-limit 128mb -q
  streaming convert train.parquet data/train --columns tokens:ndarray:int32
  streaming convert hf_saved_dir data/hf --format hf --hashes xxh64
  streaming convert more.jsonl data/corpus --append
"""


def parse_columns(text: str | None) -> dict[str, str | None] | None:
    """'id:int,tokens:ndarray:int32,junk:drop' -> {'id': 'int', ..., 'junk': None}."""
    if not text:
        return None
    columns: dict[str, str | None] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, encoding = item.partition(":")
        if not sep or not name or not encoding:
            raise UserError(f"--columns entry {item!r} must look like name:encoding")
        columns[name] = None if encoding == "drop" else encoding
    return columns


def register(sub) -> None:
    p = add_command(sub, "convert", "Convert a file or saved dataset to MDS shards.", EXAMPLES)
    p.add_argument("input", help="input file (.jsonl .csv .tsv .parquet) or save_to_disk folder")
    p.add_argument("out", help="output folder (created; an earlier run into it is resumed)")
    p.add_argument("--format", choices=["jsonl", "csv", "tsv", "parquet", "hf"],
                   help="input format (default: from the extension)")
    p.add_argument("--columns", metavar="NAME:ENC,...",
                   help="encodings to use instead of inferred ones; ENC 'drop' leaves a field out")
    p.add_argument("--compression", default="zstd",
                   help="shard compression: zstd, zstd:N, gz, bz2, br, snappy or none")
    p.add_argument("--hashes", default="", help="comma-separated digests to record, e.g. xxh64")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--size-limit", default="64mb", help="raw bytes per shard (default 64mb)")
    p.add_argument("--unordered", action="store_true",
                   help="merge parts in the order they finish instead of input order")
    p.add_argument("--no-resume", action="store_true",
                   help="discard an earlier, different conversion in OUT instead of refusing")
    p.add_argument("--exist-ok", action="store_true",
                   help="replace an MDS dataset or another conversion already in OUT")
    p.add_argument("--append", action="store_true",
                   help="add the input to the MDS dataset in OUT (same columns and compression)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from writers.convert import convert

    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    compression = None if args.compression.lower() in ("", "none") else args.compression
    hashes = [h.strip() for h in args.hashes.split(",") if h.strip()] or None
    result = convert(
        args.input, args.out, format=args.format, columns=parse_columns(args.columns),
        compression=compression, workers=args.workers, ordered=not args.unordered,
        size_limit=args.size_limit, hashes=hashes, progress=not args.quiet,
        resume=not args.no_resume, exist_ok=args.exist_ok,
        mode="append" if args.append else "create",
    )
    if not args.quiet:
        reused = f", {result.skipped_parts} reused" if result.skipped_parts else ""
        parts = f"{result.parts} part" + ("s" if result.parts != 1 else "")
        print(f"wrote {result.samples} samples in {parts}{reused} to {result.out} "
              f"in {result.seconds:.1f}s")
    return 0
