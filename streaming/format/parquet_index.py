"""The index of a Parquet stream, derived from its files' footers: one index.json entry per row
group (a "shard" to the planner and the cache), checked like any other entry when it is read.

A row group's entry names its file (`file`), its number (`row_group`), the byte ranges of the
projected column chunks (`ranges`), the cached copy of those bytes (`raw_data`: basename
`<file>.rg<group>`, bytes = the ranges' total), their size decompressed (`decoded_bytes`; an
index written before it was recorded has none) and the footer it is decoded with (`footer`:
basename `<file>.footer`, the file's size and a digest of its footer, so an entry changes
whenever its file does). Files on a filesystem are read in place: their entries name the folder
they lie in (`in_place`), and the cache holds nothing of their row groups (`raw_data` only
names each one for its reader).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streaming.errors import ParquetSchemaError, PlanError
from streaming.format.index_entries import CheckedShard, check_file_entry, fail, is_count
from streaming.format.parquet_footer import RowGroupSpan
from streaming.format.rows import RowCodec

GROUP_SUFFIX = re.compile(r"\.rg(\d{5,})$")
FOOTER_SUFFIX = ".footer"
_HEAD = struct.Struct("<QQ")  # a footer file's file size and modification time (ns, 0: none)


class ParquetCodec(RowCodec):
    """The columns of a Parquet stream (`{name: kind}`, see `column_kind`). Its rows are not
    byte spans of a file: a row group is decoded whole (see `ParquetShardReader`).

    Args:
        columns: column name -> kind, in the files' order.
        in_place: the folder the files lie in when they are read there (a filesystem), else
            None (their row groups' bytes are in the cache).
    """

    format = "parquet"
    by_span = False

    def __init__(self, columns: Mapping[str, str], in_place: str | None = None) -> None:
        self.column_names = list(columns)
        self.column_encodings = list(columns.values())
        self.in_place = in_place


    def only(self, column: str) -> ParquetCodec:
        """This codec narrowed to `column` (PlanError when it has no such column)."""
        if column not in self.column_names:
            raise PlanError(f"no Parquet column {column!r} (columns: {self.column_names})")
        return ParquetCodec({column: self.column_encodings[self.column_names.index(column)]},
                            self.in_place)


def group_basename(file: str, group: int) -> str:
    """The cached copy of row group `group` of `file` (a name relative to the stream)."""
    return f"{file}.rg{group:05d}"


def footer_basename(file: str) -> str:
    """The cached footer of `file`."""
    return file + FOOTER_SUFFIX


def split_group_name(name: str) -> tuple[str, int] | None:
    """(file, row group) of a cached row group's basename, or None if it is not one."""
    found = GROUP_SUFFIX.search(name)
    return None if found is None else (name[:found.start()], int(found.group(1)))


def footer_digest(tail: bytes) -> str:
    """The digest an entry records of its file's footer (`tail`: footer, length, magic)."""
    return hashlib.blake2b(tail, digest_size=16).hexdigest()


def footer_file_bytes(size: int, tail: bytes, mtime_ns: int = 0) -> bytes:
    """The cached footer file: the Parquet file's size and modification time in ns (u64 each,
    0: not known, as on an object store) and its last bytes."""
    return _HEAD.pack(size, mtime_ns) + tail


def parse_footer_file(data: bytes) -> tuple[int, int, bytes]:
    """(file size, modification time in ns or 0, tail) of a cached footer file."""
    if len(data) < _HEAD.size:
        raise ValueError(f"a footer file has at least {_HEAD.size} bytes, got {len(data)}")
    size, mtime_ns = _HEAD.unpack_from(data)
    return size, mtime_ns, data[_HEAD.size:]


@dataclass(frozen=True)
class ParquetFile:
    """What a stream needs of one Parquet file, from its footer.

    Args:
        name: the file, relative to the stream's remote.
        size: its bytes.
        tail: its footer, footer length and magic (its last bytes).
        columns: the projected columns' kinds.
        groups: its row groups.
        mtime_ns: its modification time in ns where the store gives one (a filesystem), else 0.
        etag: its ETag where the store lists one and can read conditionally on it, else None.
    """

    name: str
    size: int
    tail: bytes
    columns: dict[str, str]
    groups: list[RowGroupSpan]
    mtime_ns: int = 0
    etag: str | None = None


def check_same_schema(files: Sequence[ParquetFile]) -> dict[str, str]:
    """The columns every file shares; ParquetSchemaError naming two files and the column
    when one lacks a column the first has, or holds it in another type."""
    if not files:
        return {}
    first = files[0]
    for other in files[1:]:
        if other.columns == first.columns:
            continue
        for column in first.columns.keys() | other.columns.keys():
            mine, theirs = first.columns.get(column), other.columns.get(column)
            if mine != theirs:
                raise ParquetSchemaError(
                    f"column {column!r} is {mine or 'missing'} in {first.name} but "
                    f"{theirs or 'missing'} in {other.name}: every file of a Parquet stream "
                    "needs the same columns (pick common ones with `columns=[...]`)")
    return first.columns


def index_document(files: Sequence[ParquetFile], remote: str, in_place: str | None = None
                   ) -> dict[str, Any]:
    """The index.json document of a Parquet stream over `files` (in order).

    Args:
        files: the stream's files, their footers read.
        remote: where the files lie (recorded for people reading the index).
        in_place: the absolute folder the files lie in when they are read there (a
            filesystem), else None.
    """
    columns = check_same_schema(files)
    shards = []
    for file in files:
        footer = {"basename": footer_basename(file.name), "bytes": _HEAD.size + len(file.tail),
                  "digest": footer_digest(file.tail), "file_bytes": file.size,
                  "mtime_ns": file.mtime_ns, **({"etag": file.etag} if file.etag else {})}
        for g, group in enumerate(file.groups):
            shards.append({
                "format": "parquet", "file": file.name, "row_group": g, "samples": group.rows,
                "columns": columns, "ranges": [list(r) for r in group.ranges],
                "raw_data": {"basename": group_basename(file.name, g), "bytes": group.nbytes,
                             "hashes": {}}, "decoded_bytes": group.decoded,
                "zip_data": None, "compression": None, "hashes": [], "footer": footer,
                **({"in_place": in_place} if in_place is not None else {})})
    return {"version": 2, "shards": shards,
            "parquet": {"remote": remote, "files": len(files), "columns": columns}}


def check_parquet_shard(shard: Any, i: int, source: str, codecs: dict[tuple, RowCodec]
                        ) -> CheckedShard:
    """Validate Parquet entry `i`; return its row group's bytes (no compressed copy) and
    codec, as `check_text_shard` does. `codecs` memoises one codec per distinct column set."""
    where = f"shard {i}"
    if not isinstance(shard, dict):
        raise fail(source, where, f"expected an object, got {type(shard).__name__}")
    raw_name, raw_size = check_file_entry(shard.get("raw_data"), source=source, where=where)
    where = f"shard {i} ({raw_name})"
    named = split_group_name(raw_name)
    if named is None or named != (shard.get("file"), shard.get("row_group")):
        raise fail(source, where, f"is not named {group_basename(str(shard.get('file')), 0)!r}"
                                  " after its file and row group")
    if not is_count(shard.get("samples")):
        raise fail(source, where, f"samples must be >= 0: {shard.get('samples')!r}")
    footer = shard.get("footer")
    footer_name, _ = check_file_entry(footer, source=source, where=where)
    if footer_name != footer_basename(named[0]) or not is_count(footer.get("file_bytes")):
        raise fail(source, where, f"footer entry {footer!r} is not {named[0]}'s")
    ranges = shard.get("ranges")
    if not isinstance(ranges, list) or sum(_range_bytes(r) for r in ranges) != raw_size:
        raise fail(source, where, f"ranges {ranges!r} do not hold its {raw_size} bytes")
    columns = shard.get("columns")
    if not isinstance(columns, dict) or not all(isinstance(v, str) for v in columns.values()):
        raise fail(source, where, f"columns must map names to kinds, got {columns!r}")
    if not is_count(shard.get("decoded_bytes", 0)):
        raise fail(source, where, f"decoded_bytes must be >= 0: {shard.get('decoded_bytes')!r}")
    in_place = shard.get("in_place")
    if in_place is not None and not (isinstance(in_place, str) and in_place.startswith("/")):
        raise fail(source, where, f"in_place must be an absolute folder, got {in_place!r}")
    key = (tuple(columns.items()), in_place)
    codec = codecs.get(key)
    if codec is None:
        codec = codecs[key] = ParquetCodec(columns, in_place)
    return CheckedShard(raw_name, raw_size, None, 0, codec)


def _range_bytes(pair: Any) -> int:
    if (not isinstance(pair, list) or len(pair) != 2 or not all(map(is_count, pair))
            or pair[1] < pair[0]):
        return -1 << 62  # never sums to a size
    return pair[1] - pair[0]
