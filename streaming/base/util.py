"""Compatibility path `streaming.base.util` (see streaming/base/__init__.py): the helpers user
code imports from there, mapped onto this library's own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from streaming.coord.shm import clean_stale_shared_memory
from streaming.errors import UnsupportedFeatureError
from streaming.format import index as _index
from streaming.storage.schemes import split_scheme
from streaming.util.quantities import parse_bytes, parse_count


def bytes_to_int(bytes_str: int | float | str) -> int:
    """`'64mb'` -> 67108864 (binary units), as `parse_bytes`."""
    return parse_bytes(bytes_str)


def number_abbrev_to_int(abbreviated_str: int | float | str) -> int:
    """`'100k'` -> 100000 (decimal units), as `parse_count`."""
    return parse_count(abbreviated_str)


def _local(url: Any, what: str) -> Path:
    if isinstance(url, (tuple, list)):
        url = url[0]
    scheme, path = split_scheme(os.fspath(url))
    if scheme not in ("", "file"):
        raise UnsupportedFeatureError(
            f"merge_index: {what} {os.fspath(url)!r} is remote; this library merges local "
            "folders (writers upload their merged index themselves: docs/converting.md)")
    return Path(path)


def merge_index(*args: Any, **kwargs: Any) -> Path:
    """Either `merge_index(index_file_urls, out, keep_local=True, download_timeout=60)` or
    `merge_index(out, keep_local=True, download_timeout=60)`, for local folders; returns the
    merged index.json path. (`keep_local` and `download_timeout` have nothing to do here.)"""
    kwargs.pop("keep_local", None)
    kwargs.pop("download_timeout", None)
    if args and isinstance(args[0], list):
        urls, out = args[0], (args[1] if len(args) > 1 else kwargs.pop("out"))
        parts = [_local(u, "index file").parent for u in urls]
        return _index.merge_index(_local(out, "out"), parts)
    out = args[0] if args else kwargs.pop("out")
    return _index.merge_index(_local(out, "out"))


__all__ = ["bytes_to_int", "clean_stale_shared_memory", "merge_index", "number_abbrev_to_int"]
