"""The lengths of one MDS shard's samples (the elements, bytes or value of one column, or a
function of each sample) from its bytes: a vectorised scan of the per-sample size headers where
the column's encoding allows it, else decoding the column. Needs only a ShardReader."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from streaming.errors import PlanError, ShardCorruptError
from streaming.format.encodings.ndarray import parse_ndarray_name
from streaming.format.shard import ShardReader
from streaming.format.value_length import value_length

LengthFn = Callable[[Mapping[str, Any]], int]
_DECODE_CHUNK = 4096


def _scalar_dtype(encoding: str) -> np.dtype | None:
    """Little-endian dtype of an integer scalar encoding (`int`, `int32`, `uint16`, ...)."""
    if encoding == "int":
        return np.dtype("<i8")
    if encoding.startswith(("int", "uint")) and encoding[-1].isdigit():
        return np.dtype(encoding).newbyteorder("<")
    return None


# ---- one shard -------------------------------------------------------------------------------

def header_lengths(reader: ShardReader, column: str) -> np.ndarray | None:
    """Lengths of `column` for every sample of one shard from the byte layout alone, or None
    when the column's encoding needs decoding (json, pkl, ...).

    ndarray columns count elements (payload bytes minus the dtype/shape header, over itemsize),
    bytes/str count bytes, integer scalars are read as the count itself.
    """
    codec = reader.codec
    assert codec is not None
    if column not in codec.column_names:
        raise PlanError(f"{reader.path}: no column {column!r} (columns: {codec.column_names})")
    encoding = codec.column_encodings[codec.column_names.index(column)]
    n = len(reader)
    if n == 0:
        return np.zeros(0, np.int64)
    u8 = np.memmap(reader.path, np.uint8, mode="r")
    starts = reader.offsets[:-1].astype(np.int64)
    num_var = sum(size is None for size in codec.column_sizes)
    heads = _gather(u8, starts, 4 * num_var).view("<u4").reshape(n, num_var).astype(np.int64)
    pos, k = starts + 4 * num_var, 0
    span = None
    for name, size in zip(codec.column_names, codec.column_sizes):
        span = heads[:, k] if size is None else np.full(n, size, np.int64)
        k += size is None
        if name == column:
            break
        pos = pos + span
    return _decode_counts(u8, encoding, pos, span, reader)


def _gather(u8: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    if width == 0:
        return np.zeros((len(starts), 0), np.uint8)
    index = starts[:, None] + np.arange(width)
    return np.ascontiguousarray(u8[np.minimum(index, len(u8) - 1)])


def _decode_counts(u8: np.ndarray, encoding: str, pos: np.ndarray, span: np.ndarray,
                   reader: ShardReader) -> np.ndarray | None:
    if encoding in ("bytes", "str"):
        return span.astype(np.int64)
    scalar = _scalar_dtype(encoding)
    if scalar is not None:
        return _gather(u8, pos, scalar.itemsize).view(scalar).reshape(-1).astype(np.int64)
    if not encoding.startswith("ndarray"):
        return None
    enc = parse_ndarray_name(encoding)
    if enc.shape is not None:
        return np.full(len(pos), int(np.prod(enc.shape)), np.int64)
    if enc.dtype is None:
        itemsize = (u8[pos].astype(np.int64) >> 3)
        head, extra = u8[pos + 1].astype(np.int64), 2
    else:
        itemsize = np.int64(enc.dtype.itemsize)
        head, extra = u8[pos].astype(np.int64), 1
    header = extra + (head >> 2) * (1 << (head & 3))
    payload = span - header
    if (payload < 0).any() or (payload % itemsize).any():
        bad = int(np.flatnonzero((payload < 0) | (payload % itemsize != 0))[0])
        raise ShardCorruptError(f"{reader.path}: sample {bad}: {encoding} payload does not match "
                                "its shape header")
    return payload // itemsize


def decoded_lengths(reader: ShardReader, column: str | None = None,
                    fn: LengthFn | None = None) -> np.ndarray:
    """Lengths by decoding: `fn(sample)` for every sample, else `value_length(sample[column])`."""
    n = len(reader)
    out = np.zeros(n, np.int64)
    for lo in range(0, n, _DECODE_CHUNK):
        rows = np.arange(lo, min(lo + _DECODE_CHUNK, n))
        if fn is not None:
            out[rows] = [int(fn(s)) for s in reader.get_many(rows)]
        else:
            out[rows] = [value_length(reader.get_column(r, column)) for r in rows.tolist()]
    return out


def shard_lengths(reader: ShardReader, column: str | None = None,
                  fn: LengthFn | None = None) -> np.ndarray:
    """One shard's lengths: the header scan where the encoding allows it, a Parquet row
    group's decoded column, else decoding."""
    if fn is None and column is not None and not getattr(reader.codec, "by_span", True):
        return reader.column_lengths(column)  # type: ignore[attr-defined]
    if fn is None:
        assert column is not None
        counts = header_lengths(reader, column)
        if counts is not None:
            return counts
    return decoded_lengths(reader, column, fn)
