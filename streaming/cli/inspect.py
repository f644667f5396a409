"""`streaming inspect PATH_OR_URL`: what a dataset holds, from its index.json alone."""

from __future__ import annotations

import argparse
import json
from collections import Counter

import numpy as np

from streaming.cli._common import add_command, human_bytes, open_index
from streaming.format.index import DatasetIndex

EXAMPLES = """
  streaming inspect data/corpus
  streaming inspect s3://bucket/datasets/corpus --json
  streaming inspect data/corpus/index.json
"""


def register(sub) -> None:
    p = add_command(sub, "inspect", "Summarise a dataset: shards, samples, bytes, columns.",
                    EXAMPLES)
    p.add_argument("location", metavar="PATH_OR_URL", help="dataset folder, index.json or URL")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def _group(basename: str) -> str:
    head, sep, _ = basename.partition("/")
    return head if sep else "."


def summarize(index: DatasetIndex, location: str) -> dict:
    """Counts and schema of a dataset, with one entry per subfolder of a merged index."""
    groups: dict[str, dict] = {}
    for i, basename in enumerate(index.basenames):
        part = groups.setdefault(_group(basename), {"shards": 0, "samples": 0, "raw_bytes": 0,
                                                    "zip_bytes": 0})
        part["shards"] += 1
        part["samples"] += int(index.samples_per_shard[i])
        part["raw_bytes"] += int(index.raw_bytes[i])
        part["zip_bytes"] += int(index.zip_bytes[i])
    hashes = sorted({algo for shard in index.shards for algo in shard.get("hashes") or []})
    samples = index.samples_per_shard
    return {
        "location": location,
        "shards": index.num_shards,
        "samples": index.num_samples,
        "raw_bytes": int(np.sum(index.raw_bytes)),
        "zip_bytes": int(np.sum(index.zip_bytes)),
        "columns": dict(index.columns),
        "compression": dict(Counter(str(c) if c else "none" for c in index.compression)),
        "hashes": hashes,
        "size_limits": sorted({int(s["size_limit"]) for s in index.shards
                               if s.get("size_limit") is not None}),
        "samples_per_shard": {
            "min": int(samples.min()) if len(samples) else 0,
            "max": int(samples.max()) if len(samples) else 0,
        },
        "parts": groups if len(groups) > 1 or "." not in groups else {},
    }


def render(info: dict) -> str:
    lines = [
        f"dataset      {info['location']}",
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
    info = summarize(open_index(args.location), args.location)
    print(json.dumps(info, indent=2) if args.json else render(info))
    return 0
