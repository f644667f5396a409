"""A small tmpfs mounted for one test, to fill a disk for real (root only; skips otherwise)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(size: str) -> Iterator[Path]:
    """A fresh tmpfs of `size` (mount's syntax: "2m"), unmounted (lazily, if a test left a
    file open) and removed afterwards.

    Args:
        size: the file system's size.
    """
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small disk needs root to mount a tmpfs")
    where = Path(tempfile.mkdtemp(prefix="mds-small-disk-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)
        with contextlib.suppress(OSError):
            where.rmdir()
