"""`streaming inspect PATH_OR_URL`: what a dataset holds, from its index.json alone."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from streaming.cli._common import add_command, human_bytes, open_index, scratch_dir
from streaming.cli.parquet_location import add_parquet_options, parquet_index
from streaming.format.index import DatasetIndex
from streaming.format.index_columns import Names, distinct_values

EXAMPLES = """
  streaming inspect data/corpus
  streaming inspect s3://bucket/datasets/corpus --json
  streaming inspect data/corpus/index.json
  streaming inspect s3://bucket/lake/corpus --format parquet --columns text,tokens
"""


def register(sub) -> None:
    p = add_command(sub, "inspect", "Summarise a dataset: shards, samples, bytes, columns.",
                    EXAMPLES)
    p.add_argument("location", metavar="PATH_OR_URL", help="dataset folder, index.json or URL")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_parquet_options(p)
    p.set_defaults(run=run)


def _groups(index: DatasetIndex) -> dict[str, dict]:
    """Shards, samples and bytes per top-level subfolder of the basenames ("." for none), in
    order of first appearance, counted with numpy over the names column."""
    names = index.basenames
    slashes = np.flatnonzero(np.frombuffer(names.blob, np.uint8) == ord("/"))
    owner = np.searchsorted(names.offsets, slashes, side="right") - 1
    owners, first = np.unique(owner, return_index=True)
    key = np.zeros(len(names), np.int64)
    labels = ["."]
    if len(owners):
        heads = Names.spans(names.blob, names.offsets[owners], slashes[first])
        found, inverse = np.unique(heads.fixed(), return_inverse=True)
        labels += [label.decode() for label in found.tolist()]
        key[owners] = inverse.reshape(-1) + 1
    groups, seen = np.unique(key, return_index=True)
    out = {}
    for g in groups[np.argsort(seen)].tolist():
        mine = key == g
        out[labels[g]] = {"shards": int(mine.sum()),
                          "samples": int(index.samples_per_shard[mine].sum()),
                          "raw_bytes": int(index.raw_bytes[mine].sum()),
                          "zip_bytes": int(index.zip_bytes[mine].sum())}
    return out


def summarize(index: DatasetIndex, location: str) -> dict:
    """Counts and schema of a dataset, with one entry per subfolder of a merged index; costs
    numpy passes over the index's columns, no object per shard."""
    groups = _groups(index)
    hashes = sorted({algo for value in distinct_values(index.shards, "hashes")
                     for algo in value or []})
    samples = index.samples_per_shard
    codecs = index.compression
    present = codecs.mask()
    found, counts = np.unique(codecs.fixed(), return_counts=True)
    compression = {k.decode(): int(c) for k, c in zip(found.tolist(), counts.tolist())}
    if not present.all():
        compression = {"none": int((~present).sum()), **compression}
    return {
        "location": location,
        "shards": index.num_shards,
        "samples": index.num_samples,
        "raw_bytes": int(np.sum(index.raw_bytes)),
        "zip_bytes": int(np.sum(index.zip_bytes)),
        "columns": dict(index.columns),
        "compression": compression,
        "hashes": hashes,
        "size_limits": sorted({int(s) for s in distinct_values(index.shards, "size_limit")
                               if s is not None}),
        "samples_per_shard": {
            "min": int(samples.min()) if len(samples) else 0,
            "max": int(samples.max()) if len(samples) else 0,
        },
        "parts": groups if len(groups) > 1 or "." not in groups else {},
    }


def render(info: dict) -> str:
    lines = [
        f"dataset      {info['location']}",
        *([f"parquet      {info['files']} files, one shard per row group"]
          if "files" in info else []),
        f"shards       {info['shards']}",
        f"samples      {info['samples']}  (per shard {info['samples_per_shard']['min']}"
        f"..{info['samples_per_shard']['max']})",
        f"raw bytes    {info['raw_bytes']}  ({human_bytes(info['raw_bytes'])})",
    ]
    if info["zip_bytes"]:
        ratio = info["raw_bytes"] / info["zip_bytes"]
        lines.append(f"compressed   {info['zip_bytes']}  ({human_bytes(info['zip_bytes'])}, "
                     f"ratio {ratio:.2f})")
    codecs = ", ".join(f"{name} x{count}" for name, count in info["compression"].items())
    lines.append(f"compression  {codecs or 'none'}")
    lines.append(f"hashes       {', '.join(info['hashes']) or 'none'}")
    lines.append("columns")
    width = max((len(name) for name in info["columns"]), default=0)
    lines += [f"  {name:<{width}}  {enc}" for name, enc in info["columns"].items()]
    if info["parts"]:
        lines.append("parts")
        width = max(len(name) for name in info["parts"])
        for name, part in info["parts"].items():
            lines.append(f"  {name:<{width}}  {part['shards']:>6} shards  "
                         f"{part['samples']:>10} samples  {human_bytes(part['raw_bytes']):>10}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.format == "parquet":
        with scratch_dir() as scratch:
            index = parquet_index(args.location, args.columns, Path(scratch))
        info = {"format": "parquet", **summarize(index, args.location),
                "files": len({entry["file"] for entry in index.shards})}
    else:
        info = summarize(open_index(args.location), args.location)
    print(json.dumps(info, indent=2) if args.json else render(info))
    return 0
