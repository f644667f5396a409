"""Snapshots of the files around a cache folder, to prove a run left every file outside it as
it was (hostile-data tests and benchmarks/fuzz_readers.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, str]]:
    """Every file, folder and link under `root` but outside `skip` (and not `skip` itself):
    (mode, content digest, link target or "dir") by path relative to `root`."""
    out: dict[str, tuple[int, str]] = {}
    for top, dirs, files in os.walk(root, followlinks=False):
        if Path(top) == skip or skip in Path(top).parents:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = Path(top) / name
            if path == skip:
                continue
            info = path.lstat()
            body = (os.readlink(path) if path.is_symlink() else
                    hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else "dir")
            out[str(path.relative_to(root))] = (info.st_mode, body)
    return out
