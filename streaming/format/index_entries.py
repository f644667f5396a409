"""Checks of what every shard entry of index.json holds, whatever the shard format (MDS or a
text format): typed keys and the entry version, file entries (a basename that stays inside the
dataset folder, a byte count in range, digests), and the compression codec with the compressed
copies it implies. Every error names the index and the shard."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streaming.errors import IndexFileError
from streaming.format.compression import parse_compression

if TYPE_CHECKING:
    from streaming.format.rows import RowCodec

INDEX_VERSION = 2
# Top-level key describing per-shard token-count side files (old readers ignore top-level keys).
LENGTHS_KEY = "sample_lengths"
# A raw shard's offsets are u32 and its last offset is the file size, so it holds at most
# 2**32 - 1 bytes, and its header (count plus one offset) is at least 8; no codec grows data
# anywhere near twofold, so a compressed file above MAX_ZIP_BYTES is a corrupt index.
MAX_RAW_BYTES = 2**32 - 1
MIN_RAW_BYTES = 8
MAX_ZIP_BYTES = 2**33


@dataclass(frozen=True)
class CheckedShard:
    """What the checks of one shard entry found: its data file and compressed copy, and how
    its rows decode.

    Args:
        raw_name: the data file's base name.
        raw_size: the data file's bytes.
        zip_name: the compressed copy's base name (None: stored uncompressed).
        zip_size: the compressed copy's bytes (0 without one).
        codec: the row codec of a text or Parquet shard (None: MDS, decoded by its columns).
    """

    raw_name: str
    raw_size: int
    zip_name: str | None
    zip_size: int
    codec: RowCodec | None = None


def fail(source: str, where: str, what: str) -> IndexFileError:
    """The error for `what` is wrong at `where` (a shard) of the index `source`."""
    return IndexFileError(f"{source}: {where}: {what}")


# Names our own bookkeeping uses in a dataset or cache folder: a shard file may not take them.
RESERVED_NAMES = frozenset({"index.json"})
MAX_NAME_BYTES = 255  # one path component, as most file systems allow
MAX_PATH_BYTES = 1024
# Names that need no closer look: parts of plain characters that start with no dot, each short
# enough in bytes (millions of shards pass here, so the common case is one regex match).
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,62}(?:/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,62})*")
_UNSAFE_CHAR = re.compile(r"[\x00-\x1f\\]")


def check_basename(basename: Any, *, source: str, where: str) -> str:
    """Accept a relative posix basename that stays inside the dataset folder and cannot be
    mistaken for one of this library's own files.

    Args:
        basename: the name as the index gives it.
        source: the index (for the error message).
        where: the shard or entry (for the error message).

    Raises:
        IndexFileError: naming the index, the entry and what is wrong with the name.
    """
    if not isinstance(basename, str) or not basename:
        raise fail(source, where, f"basename must be a non-empty string, got {basename!r}")
    bad = _name_fault(basename)
    if bad:
        raise fail(source, where, f"basename {basename!r} {bad}")
    return basename


def _name_fault(name: str) -> str | None:
    """What makes `name` unsafe as a file name below a dataset folder, or None."""
    if _PLAIN.fullmatch(name) and len(name) <= MAX_PATH_BYTES:
        return _reserved(name.rpartition("/")[2])
    if _UNSAFE_CHAR.search(name):
        return "contains a backslash, NUL byte or control character"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "is an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "contains '..' and could escape the dataset folder"
    if posixpath.normpath(name) in (".", ""):
        return "names the dataset folder itself"
    if posixpath.normpath(name) != name:
        return "is not a plain path (empty or '.' parts, or a trailing '/')"
    if len(name.encode()) > MAX_PATH_BYTES or any(
            len(part.encode()) > MAX_NAME_BYTES for part in parts):
        return (f"is too long (at most {MAX_NAME_BYTES} bytes a part, "
                f"{MAX_PATH_BYTES} in all)")
    return _reserved(parts[-1])


def _reserved(leaf: str) -> str | None:
    if leaf in RESERVED_NAMES or leaf.startswith("."):
        return ("is index.json or a hidden name, which this library keeps for its own files "
                "(indexes, temp files, locks, the cache's records)")
    return None


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
