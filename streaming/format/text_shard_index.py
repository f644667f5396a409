"""index.json entries of text shards (`json`, `csv`, `tsv`, `xsv`): checked as strictly as MDS
entries, so a bad entry is named up front rather than mid-epoch."""

from __future__ import annotations

from typing import Any

from streaming.errors import FormatError
from streaming.format.index_entries import (
    CheckedShard,
    check_compressed_copy,
    check_compression,
    check_file_entry,
    check_keys,
    fail,
)
from streaming.format.rows import RowCodec, row_codec
from streaming.format.text_shard import META_SUFFIX

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


def check_text_shard(shard: dict, i: int, source: str, codecs: dict[tuple, RowCodec]
                      ) -> CheckedShard:
    """Validate text shard entry `i`; return its data file, compressed copy and row codec.
    `codecs` memoises one codec per distinct schema."""
    where = f"shard {i}"
    check_keys(shard, _REQUIRED, source, where)
    raw_name, raw_size = check_file_entry(shard["raw_data"], source=source, where=where)
    where = f"shard {i} ({raw_name})"
    meta_name, _ = check_file_entry(shard["raw_meta"], source=source, where=where)
    if meta_name != raw_name + META_SUFFIX:
        raise fail(source, where, f"meta file {meta_name!r} is not named "
                                  f"{raw_name + META_SUFFIX!r}")
    if not 0 <= shard["samples"] <= raw_size:  # every row takes a byte at least
        raise fail(source, where, f"samples must be >= 0 and at most the {raw_size} bytes of "
                                  f"its file (a row takes a byte at least): {shard['samples']!r}")
    key = _schema_key(shard)
    codec = codecs.get(key)
    if codec is None:
        try:
            codec = codecs[key] = row_codec(shard)
        except FormatError as exc:
            raise fail(source, where, str(exc)) from None
    check_compression(shard, source, where)
    zip_name, zip_size = check_compressed_copy(shard, "zip_data", source, where)
    check_compressed_copy(shard, "zip_meta", source, where)
    return CheckedShard(raw_name, raw_size, zip_name, zip_size, codec)


def _schema_key(shard: dict) -> tuple:
    def frozen(value: Any) -> Any:
        if isinstance(value, dict):
            return tuple(sorted((str(k), frozen(v)) for k, v in value.items()))
        if isinstance(value, list):
            return tuple(frozen(v) for v in value)
        return value

    return tuple(frozen(shard.get(k)) for k in ("format", "columns", "column_names",
                                                  "column_encodings", "separator", "newline"))
