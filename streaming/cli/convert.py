"""`streaming convert INPUT... OUT`: JSONL, CSV/TSV, Parquet or saved HF datasets -> MDS."""

from __future__ import annotations

import argparse
import re

from streaming.cli._common import CommandFailed, UserError, add_command

EXAMPLES = """
  streaming convert corpus.jsonl data/corpus
  streaming convert crawl/ data/crawl --workers 8            # every .jsonl(.gz/.zst) in a folder
  streaming convert 'raw/part-*.parquet' data/raw --workers 4
  streaming convert a.jsonl b.jsonl c.jsonl data/abc
  streaming convert s3://bucket/raw/ s3://bucket/mds --workers 4
  streaming convert table.csv data/table --columns id:int,price:float64 --workers 4
  streaming convert logs.tsv data/logs --compression zstd:7 --size-limit 128mb -q
  streaming convert train.parquet data/train --columns tokens:ndarray:int32 --lengths tokens
  streaming convert hf_saved_dir data/hf --format hf --hashes xxh64
  streaming convert more.jsonl data/corpus --append
  streaming convert corpus.jsonl s3://bucket/corpus --local data/corpus   # keep a local copy
"""

# Python spellings in library messages -> this command's options.
_CLI_WORDS = [
    (re.compile(r"columns=\{'([^']+)': '([^']*)'\}"), r"--columns \1:\2"),
    (re.compile(r"columns=\{'([^']+)': None\}"), r"--columns \1:drop"),
    (re.compile(r"\bformat=(?!\w)"), "--format"),
    (re.compile(r"\bcolumns=(?!\w)"), "--columns"),
    (re.compile(r"\bexist_ok=True"), "--exist-ok"),
    (re.compile(r"\bresume=False"), "--no-resume"),
    (re.compile(r"mode='append'"), "--append"),
    (re.compile(r"mode='overwrite'"), "--overwrite"),
    (re.compile(r"\blengths=(?=')"), "--lengths "),
    (re.compile(r"\bworkers(?= must)"), "--workers"),
    (re.compile(r" \(CLI: [^)]*\)"), ""),
]


def cli_words(message: str) -> str:
    """A library error message with Python keyword spellings replaced by CLI options."""
    for pattern, replacement in _CLI_WORDS:
        message = pattern.sub(replacement, message)
    return message.replace("a column set to None is dropped", "ENC 'drop' leaves a column out")


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
    p = add_command(sub, "convert", "Convert files, folders or saved datasets to MDS shards.",
                    EXAMPLES)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="input files (.jsonl .jsonl.gz .jsonl.zst .csv .tsv .parquet), folders, "
                        "globs, remote prefixes (s3:// gs:// az://) or save_to_disk folders")
    p.add_argument("out", metavar="OUT",
                   help="output folder or URL (an earlier run into it is resumed)")
    p.add_argument("--format", choices=["jsonl", "csv", "tsv", "parquet", "hf"],
                   help="input format (default: from the extensions)")
    p.add_argument("--columns", metavar="NAME:ENC,...",
                   help="encodings to use instead of inferred ones; ENC 'drop' leaves a field out")
    p.add_argument("--compression", default="zstd",
                   help="shard compression: zstd, zstd:N, gz, bz2, br, snappy or none "
                        "(default zstd; MDSWriter's own default is none)")
    p.add_argument("--hashes", default="", help="comma-separated digests to record, e.g. xxh64")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--size-limit", default="64mb", help="raw bytes per shard (default 64mb)")
    p.add_argument("--lengths", metavar="COLUMN",
                   help="record COLUMN's per-sample lengths while writing (for packing)")
    p.add_argument("--local", metavar="DIR",
                   help="with a remote OUT: convert into DIR (kept) and upload from it")
    p.add_argument("--unordered", action="store_true",
                   help="merge parts in the order they finish instead of input order")
    p.add_argument("--no-resume", action="store_true",
                   help="discard an earlier, different conversion in OUT instead of refusing")
    p.add_argument("--exist-ok", action="store_true",
                   help="replace an MDS dataset or another conversion already in OUT")
    grow = p.add_mutually_exclusive_group()
    grow.add_argument("--append", action="store_true",
                      help="add the input to the MDS dataset in OUT (same columns and "
                           "compression)")
    grow.add_argument("--overwrite", action="store_true",
                      help="replace the MDS dataset in OUT, publishing the new index last")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(run=run)


def _mode(args: argparse.Namespace) -> str:
    return "append" if args.append else "overwrite" if args.overwrite else "create"


def run(args: argparse.Namespace) -> int:
    from streaming.errors import StreamingError
    from writers.convert import convert

    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    compression = None if args.compression.lower() in ("", "none") else args.compression
    hashes = [h.strip() for h in args.hashes.split(",") if h.strip()] or None
    source = args.inputs[0] if len(args.inputs) == 1 else args.inputs
    out = (args.local, args.out) if args.local else args.out
    try:
        result = convert(
            source, out, format=args.format, columns=parse_columns(args.columns),
            compression=compression, workers=args.workers, ordered=not args.unordered,
            size_limit=args.size_limit, hashes=hashes, progress=_show_progress(args),
            resume=not args.no_resume, exist_ok=args.exist_ok, mode=_mode(args),
            lengths=args.lengths,
        )
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as exc:
        raise UserError(cli_words(str(exc))) from exc
    except StreamingError as exc:
        raise CommandFailed(cli_words(str(exc))) from exc
    if not args.quiet:
        print(summary(result))
    return 0


def _show_progress(args: argparse.Namespace) -> bool:
    return not args.quiet


def summary(result) -> str:
    """What a conversion wrote, one line per input file for inputs of several files."""
    reused = f", {result.skipped_parts} reused" if result.skipped_parts else ""
    parts = f"{result.parts} part" + ("s" if result.parts != 1 else "")
    lines = []
    if result.file_samples:
        width = max(len(name) for name in result.file_samples)
        lines += [f"  {name:<{width}}  {count} samples"
                  for name, count in result.file_samples.items()]
    if result.empty_files:
        lines.append(f"skipped {len(result.empty_files)} empty file"
                     f"{'s' if len(result.empty_files) != 1 else ''}: "
                     + ", ".join(result.empty_files[:10])
                     + (", ..." if len(result.empty_files) > 10 else ""))
    files = f" from {len(result.file_samples)} files" if result.file_samples else ""
    lines.append(f"wrote {result.samples} samples{files} in {parts}{reused} to {result.out} "
                 f"in {result.seconds:.1f}s")
    return "\n".join(lines)
