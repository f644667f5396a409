"""`streaming cache show|clear LOCAL_DIR`: the shards a node-local cache holds, and emptying it.

A folder counts as a cache only if it holds the `.streaming-cache` marker that the dataset
writes into `local` directories it fills from a remote; `clear` refuses any other folder, so a
source dataset (whose shards are the only copy) can never be wiped by mistake.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from streaming.cache.folder.cache_marker import mark_cache
from streaming.cache.folder.file_names import CACHE_MARKER, ORIGIN_FILE
from streaming.cache.folder.origin import Origin
from streaming.cli._common import UserError, add_command, human_bytes
from streaming.util.confine import remove

__all__ = ["CACHE_MARKER", "mark_cache", "register", "run", "shard_files"]
_SHARD = re.compile(r"^(\.)?shard\.\d{5}\.mds(\.[a-z0-9]+)?(\..*\.tmp)?$")

EXAMPLES = """
  streaming cache show /tmp/cache/corpus
  streaming cache show /tmp/cache/corpus --json
  streaming cache clear /tmp/cache/corpus
"""


def register(sub) -> None:
    p = add_command(sub, "cache", "Show or clear the shards of a node-local cache folder.",
                    EXAMPLES)
    p.add_argument("action", choices=["show", "clear"])
    p.add_argument("local", metavar="LOCAL_DIR", help="the dataset's local cache folder")
    p.add_argument("--json", action="store_true", help="machine-readable output (show)")
    p.set_defaults(run=run)


def shard_files(folder: Path) -> list[Path]:
    """Cached shard files (raw, compressed, partial downloads) anywhere under `folder`."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and _SHARD.match(p.name))


def run(args: argparse.Namespace) -> int:
    folder = Path(args.local)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a directory")
    files = shard_files(folder)
    size = sum(p.stat().st_size for p in files)
    marked = (folder / CACHE_MARKER).is_file()
    if args.action == "show":
        origin = Origin.read(folder)
        info = {"local": str(folder), "cache_marker": marked, "shard_files": len(files),
                "bytes": size, "indexes": len(list(folder.rglob("index.json"))),
                "remote": origin.remote if origin is not None else None}
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            kind = "cache" if marked else "not a cache (no .streaming-cache marker)"
            print(f"{folder}: {kind}\n  shard files  {len(files)}\n"
                  f"  size         {size} ({human_bytes(size)})\n  index files  {info['indexes']}"
                  f"\n  remote       {info['remote'] or 'unknown (no origin record)'}")
        return 0
    if not marked:
        raise UserError(
            f"refusing to clear {folder}: it has no {CACHE_MARKER} marker, so it may be a source "
            "dataset whose shards are the only copy"
        )
    for path in files:
        remove(folder, path)
    for record in folder.rglob(ORIGIN_FILE):  # the folder may now cache another remote
        remove(folder, record)
    print(f"removed {len(files)} shard files ({human_bytes(size)}) from {folder}")
    return 0
