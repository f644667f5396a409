"""The checks of one MDS shard entry of index.json: required keys and types, file entries,
sample count against the raw size, column schema, codec and the compressed copy."""

from __future__ import annotations

from typing import Any

from streaming.errors import IndexFileError, UnknownEncodingError
from streaming.format.encodings import get_encoding
from streaming.format.index_entries import (
    INDEX_VERSION,
    MAX_RAW_BYTES,
    MIN_RAW_BYTES,
    CheckedShard,
    check_compressed_copy,
    check_compression,
    check_file_entry,
    check_keys,
    fail,
    is_count,
)
from streaming.format.rows import ROW_FORMATS

SUPPORTED_FORMATS = ("mds", *ROW_FORMATS, "parquet")  # parquet: format/parquet_index.py
SCHEMA_KEYS = ("column_names", "column_encodings", "column_sizes")
_REQUIRED = {
    "format": str,
    "version": int,
    "column_names": list,
    "column_encodings": list,
    "column_sizes": list,
    "compression": (str, type(None)),
    "hashes": list,
    "raw_data": dict,
    "zip_data": (dict, type(None)),
    "samples": int,
    "size_limit": (int, type(None)),
}



def max_samples(raw_bytes: int) -> int:
    """The most samples a raw shard of `raw_bytes` can hold (4 offset bytes per sample)."""
    return max(raw_bytes - MIN_RAW_BYTES, 0) // 4



def check_mds_shard(
    shard: Any, i: int, source: str, schemas: set[tuple]
) -> CheckedShard:
    """The files of MDS shard entry `i`, checked whole.

    Args:
        shard: the entry as parsed.
        i: its position in the index.
        source: the index (for error messages).
        schemas: column schemas already checked (updated).

    Raises:
        IndexFileError: naming the index, the shard and what is wrong.
    """
    where = f"shard {i}"
    if not isinstance(shard, dict):
        raise fail(source, where, f"expected an object, got {type(shard).__name__}")
    fmt = shard.get("format")
    if fmt not in SUPPORTED_FORMATS:
        raise fail(
            source, where,
            f"format {fmt!r} is not supported (supported: {', '.join(SUPPORTED_FORMATS)})",
        )
    check_keys(shard, _REQUIRED, source, where)
    raw_name, raw_size = check_file_entry(shard["raw_data"], source=source, where=where,
                                           limits=(MIN_RAW_BYTES, MAX_RAW_BYTES))
    where = f"shard {i} ({raw_name})"
    if not is_count(shard["samples"]):
        raise fail(source, where, f"samples must be a non-negative int: {shard['samples']!r}")
    if shard["samples"] > max_samples(raw_size):
        raise fail(source, where, f"{shard['samples']} samples cannot fit in {raw_size} bytes "
                                   f"(at most {max_samples(raw_size)})")
    # Shards almost always share one schema: check each distinct schema once.
    schema = tuple(tuple(shard[key]) for key in SCHEMA_KEYS)
    try:
        known = schema in schemas
    except TypeError:  # unhashable junk in a column list; _check_columns names it
        known = False
    if not known:
        _check_columns(shard, source, where)
        schemas.add(schema)
    check_compression(shard, source, where)
    zip_name, zip_size = check_compressed_copy(shard, "zip_data", source, where)
    if not all(isinstance(h, str) for h in shard["hashes"]):
        raise fail(source, where, f"hashes must be algorithm names: {shard['hashes']!r}")
    return CheckedShard(raw_name, raw_size, zip_name, zip_size)


def _check_columns(shard: dict, source: str, where: str) -> None:
    names, encodings = shard["column_names"], shard["column_encodings"]
    sizes = shard["column_sizes"]
    if not (len(names) == len(encodings) == len(sizes)):
        raise fail(source, where, "column_names, column_encodings, column_sizes differ in length")
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise fail(source, where, f"column names must be unique strings: {names!r}")
    for name, enc, size in zip(names, encodings, sizes):
        try:
            expected = get_encoding(enc).size
        except UnknownEncodingError as exc:
            raise UnknownEncodingError(f"{source}: {where}: column {name!r}: {exc}") from None
        if size != expected or isinstance(size, bool):
            raise fail(source, where, f"column {name!r} ({enc}) has size {size!r}, not {expected}")




def check_document(data: Any, source: str) -> list:
    """The shard list of a parsed index document whose top level is sound (an object of
    version 2 with a `shards` list).

    Args:
        data: the parsed document.
        source: the index (for error messages).

    Raises:
        IndexFileError: naming the index and what is wrong.
    """
    if not isinstance(data, dict):
        raise IndexFileError(f"{source}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != INDEX_VERSION or isinstance(version, bool):
        raise IndexFileError(f"Unsupported streaming data version: {version!r}. Expected "
                             f"version 2. {source}: index version {version!r} is not supported")
    shards = data.get("shards")
    if not isinstance(shards, list):
        raise IndexFileError(f"{source}: 'shards' must be a list, got {type(shards).__name__}")
    return shards
