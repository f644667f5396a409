"""Checks of what every shard entry of index.json holds, whatever the shard format (MDS or a
text format): typed keys and the entry version, file entries (a basename that stays inside the
dataset folder, a byte count in range, digests), and the compression codec with the compressed
copies it implies. Every error names the index and the shard."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from streaming.errors import IndexFileError
from streaming.format.compression import parse_compression

INDEX_VERSION = 2
# A raw shard's offsets are u32 and its last offset is the file size, so it holds at most
# 2**32 - 1 bytes, and its header (count plus one offset) is at least 8; no codec grows data
# anywhere near twofold, so a compressed file above MAX_ZIP_BYTES is a corrupt index.
MAX_RAW_BYTES = 2**32 - 1
MIN_RAW_BYTES = 8
MAX_ZIP_BYTES = 2**33


def fail(source: str, where: str, what: str) -> IndexFileError:
    """The error for `what` is wrong at `where` (a shard) of the index `source`."""
    return IndexFileError(f"{source}: {where}: {what}")


def check_basename(basename: Any, *, source: str, where: str) -> str:
    """Accept a relative posix basename that stays inside the dataset folder."""
    if not isinstance(basename, str) or not basename:
        raise fail(source, where, f"basename must be a non-empty string, got {basename!r}")
    bad = None
    if "\\" in basename or "\x00" in basename:
        bad = "contains a backslash or NUL byte"
    elif basename.startswith("/") or re.match(r"^[A-Za-z]:", basename):
        bad = "is an absolute path"
    elif ".." in basename.split("/"):
        bad = "contains '..' and could escape the dataset folder"
    elif posixpath.normpath(basename) in (".", ""):
        bad = "names the dataset folder itself"
    if bad:
        raise fail(source, where, f"basename {basename!r} {bad}")
    return basename


def is_count(value: Any) -> bool:
    """Whether `value` is a non-negative int (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_file_entry(entry: Any, *, source: str, where: str,
                     limits: tuple[int, int] = (0, MAX_ZIP_BYTES)) -> tuple[str, int]:
    """(basename, bytes) of a file entry whose byte count lies within `limits`."""
    if not isinstance(entry, dict):
        raise fail(source, where, f"expected an object with basename/bytes/hashes, got {entry!r}")
    basename = check_basename(entry.get("basename"), source=source, where=where)
    size = entry.get("bytes")
    if not is_count(size):
        raise fail(source, where, f"{basename}: bytes must be a non-negative int, got {size!r}")
    low, high = limits
    if not low <= size <= high:
        raise fail(source, where, f"{basename}: bytes {size} is outside [{low}, {high}]")
    hashes = entry.get("hashes", {})
    if not isinstance(hashes, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in hashes.items()
    ):
        raise fail(source, where, f"{basename}: hashes must map algorithm to hex digest")
    return basename, size


def check_keys(shard: dict, required: Mapping[str, type | tuple[type, ...]], source: str,
               where: str) -> None:
    """Every `required` key is present with its type (a bool is no int), and the entry's
    version is INDEX_VERSION."""
    for key, kind in required.items():
        if key not in shard:
            raise fail(source, where, f"missing key {key!r}")
        value = shard[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise fail(source, where, f"{key} has the wrong type: {value!r}")
    if shard["version"] != INDEX_VERSION:
        raise fail(source, where, f"shard version {shard['version']} (expected {INDEX_VERSION})")


def check_compression(shard: dict, source: str, where: str) -> None:
    """The entry's `compression` names a known codec and level, or is None."""
    try:
        parse_compression(shard["compression"])
    except ValueError as exc:
        raise fail(source, where, str(exc)) from None


def check_compressed_copy(shard: dict, key: str, source: str, where: str) -> tuple[str | None, int]:
    """(basename, bytes) of the compressed file entry `shard[key]`, or (None, 0) when there is
    none; it must exist exactly when the entry names a compression."""
    name, size = None, 0
    if shard[key] is not None:
        name, size = check_file_entry(shard[key], source=source, where=where)
    if (shard["compression"] is None) != (name is None):
        raise fail(source, where, f"compression {shard['compression']!r} but {key} {name!r}")
    return name, size
