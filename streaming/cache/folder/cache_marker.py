"""The `.streaming-cache` marker: a folder holding it is a cache this library filled from a
remote, so `streaming cache clear` may empty it; a folder without it may hold the only copy."""

from __future__ import annotations

import contextlib
from pathlib import Path

from streaming.cache.folder.file_names import CACHE_MARKER


def mark_cache(folder: str | Path) -> Path:
    """Declare `folder` a cache (creates it); returns the marker's path."""
    marker = Path(folder) / CACHE_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        marker.touch(exist_ok=False)
    return marker


def is_cache(folder: str | Path) -> bool:
    """Whether `folder` holds the marker."""
    return (Path(folder) / CACHE_MARKER).is_file()
