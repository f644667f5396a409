"""File facts every layer asks for (the format's text shard files, local datasets, the cache)."""

from __future__ import annotations

from pathlib import Path


def has_size(path: Path, size: int) -> bool:
    """Whether `path` is a file of exactly `size` bytes (False when it cannot be looked at)."""
    try:
        return path.stat().st_size == size
    except OSError:
        return False
