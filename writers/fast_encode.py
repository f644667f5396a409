"""Writer-side fast path for the common column types (int, str, bytes, typed ndarray).

Each column gets a small closure that handles only the exact common Python type and returns None
otherwise; any None sends the whole sample through SampleCodec.encode, the canonical encoder,
which also produces the proper errors. Tests check both paths give identical bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from streaming.format.encodings import get_encoding
from streaming.format.encodings.ndarray import NDArrayEncoding, encode_shape
from streaming.format.sample import SampleCodec

Payload = bytes | memoryview
ColumnEncoder = Callable[[Any], Payload | None]
_INT64 = struct.Struct("<q")


def _bytes(value: Any) -> Payload | None:
    return value if type(value) is bytes else None


def _str(value: Any) -> Payload | None:
    if type(value) is not str:
        return None
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _int(value: Any) -> Payload | None:
    if type(value) is not int:
        return None
    try:
        return _INT64.pack(value)
    except struct.error:
        return None


def _shape_header_1d(n: int) -> bytes:
    # One dimension: header byte (1 << 2) | width code, then n at that width.
    if n < 1 << 8:
        return bytes((4, n))
    if n < 1 << 16:
        return b"\x05" + n.to_bytes(2, "little")
    return encode_shape((n,))


def _ndarray(encoding: NDArrayEncoding) -> ColumnEncoder | None:
    if encoding.dtype is None:
        return None
    # np.dtype("<i4") is the interned dtype object arrays carry, so `is` is a valid fast test.
    dtype, shape = np.dtype(encoding.dtype.str), encoding.shape
    if shape is not None:

        def fixed(value: Any) -> Payload | None:
            if (
                isinstance(value, np.ndarray)
                and value.dtype is dtype
                and value.shape == shape
                and value.flags.c_contiguous
            ):
                return memoryview(value).cast("B")
            return None

        return fixed

    def flat(value: Any) -> Payload | None:
        if (
            isinstance(value, np.ndarray)
            and value.dtype is dtype
            and value.ndim == 1
            and value.shape[0] > 0
            and value.flags.c_contiguous
        ):
            return _shape_header_1d(value.shape[0]) + value.tobytes()
        return None

    return flat


def column_encoder(encoding_name: str) -> ColumnEncoder | None:
    """A fast encoder for `encoding_name`, or None when that encoding has no fast path."""
    encoding = get_encoding(encoding_name)
    if isinstance(encoding, NDArrayEncoding):
        return _ndarray(encoding)
    return {"bytes": _bytes, "str": _str, "int": _int}.get(encoding.name)


def sample_encoder(codec: SampleCodec) -> Callable[[Mapping[str, Any]], bytes]:
    """`codec.encode`, or an equivalent faster function when every column has a fast path."""
    fast = [column_encoder(name) for name in codec.column_encodings]
    if any(fn is None for fn in fast):
        return codec.encode
    columns = list(zip(codec.column_names, fast))
    var_index = [i for i, size in enumerate(codec.column_sizes) if size is None]
    pack_lengths = struct.Struct(f"<{len(var_index)}I").pack
    slow = codec.encode

    def encode(sample: Mapping[str, Any]) -> bytes:
        try:
            payloads = [fn(sample[name]) for name, fn in columns]
        except KeyError:
            return slow(sample)
        if None in payloads:
            return slow(sample)
        lengths = [len(payloads[i]) for i in var_index]
        if lengths and max(lengths) >> 32:
            return slow(sample)
        return b"".join([pack_lengths(*lengths), *payloads])

    return encode
