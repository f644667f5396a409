"""index.json entries of split shards (`json`, `csv`, `tsv`, `xsv`): checked as strictly as MDS
entries, so a bad entry is named up front rather than mid-epoch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.errors import FormatError, IndexFileError
from streaming.format.compression import parse_compression
from streaming.format.rows import RowCodec, row_codec
from streaming.format.split import META_SUFFIX

_REQUIRED = {
    "version": int,
    "compression": (str, type(None)),
    "hashes": list,
    "raw_data": dict,
    "raw_meta": dict,
    "zip_data": (dict, type(None)),
    "zip_meta": (dict, type(None)),
    "samples": int,
    "size_limit": (int, type(None)),
    "newline": str,
}


def _fail(source: str, where: str, what: str) -> IndexFileError:
    return IndexFileError(f"{source}: {where}: {what}")


def check_split_shard(shard: dict, i: int, source: str, check_file: Callable[..., tuple[str, int]],
                      codecs: dict[tuple, RowCodec]) -> tuple[RowCodec, str, int, str | None, int]:
    """Validate split shard entry `i`; return its row codec and (raw name, raw bytes, zip name,
    zip bytes) of its data file. `check_file(entry, source=, where=)` checks a file entry and
    returns (basename, bytes); `codecs` memoises one codec per distinct schema."""
    where = f"shard {i}"
    for key, kind in _REQUIRED.items():
        if key not in shard:
            raise _fail(source, where, f"missing key {key!r}")
        value = shard[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _fail(source, where, f"{key} has the wrong type: {value!r}")
    if shard["version"] != 2:
        raise _fail(source, where, f"shard version {shard['version']} (expected 2)")
    raw_name, raw_size = check_file(shard["raw_data"], source=source, where=where)
    where = f"shard {i} ({raw_name})"
    meta_name, _ = check_file(shard["raw_meta"], source=source, where=where)
    if meta_name != raw_name + META_SUFFIX:
        raise _fail(source, where, f"meta file {meta_name!r} is not named "
                                   f"{raw_name + META_SUFFIX!r}")
    if shard["samples"] < 0:
        raise _fail(source, where, f"samples must be >= 0: {shard['samples']!r}")
    key = _schema_key(shard)
    codec = codecs.get(key)
    if codec is None:
        try:
            codec = codecs[key] = row_codec(shard)
        except FormatError as exc:
            raise _fail(source, where, str(exc)) from None
    compression = shard["compression"]
    try:
        parse_compression(compression)
    except ValueError as exc:
        raise _fail(source, where, str(exc)) from None
    zip_name, zip_size = None, 0
    if shard["zip_data"] is not None:
        zip_name, zip_size = check_file(shard["zip_data"], source=source, where=where)
    if shard["zip_meta"] is not None:
        check_file(shard["zip_meta"], source=source, where=where)
    if (compression is None) != (zip_name is None) or (zip_name is None) != (
            shard["zip_meta"] is None):
        raise _fail(source, where, f"compression {compression!r} but zip_data {zip_name!r} "
                                   f"and zip_meta {shard['zip_meta']!r}")
    return codec, raw_name, raw_size, zip_name, zip_size


def _schema_key(shard: dict) -> tuple:
    def frozen(value: Any) -> Any:
        if isinstance(value, dict):
            return tuple(sorted((str(k), frozen(v)) for k, v in value.items()))
        if isinstance(value, list):
            return tuple(frozen(v) for v in value)
        return value

    return tuple(frozen(shard.get(k)) for k in ("format", "columns", "column_names",
                                                  "column_encodings", "separator", "newline"))
