"""numpy array encodings: `ndarray`, `ndarray:<dtype>`, `ndarray:<dtype>:<d0,d1,...>`.

Layout, all little-endian: `[dtype code u8]` (dynamic dtype only), then a shape header (dynamic
shape only): one byte `(ndim << 2) | w` and `ndim` dimensions each stored as u8/u16/u32/u64 for
w = 0/1/2/3 (the narrowest width that holds the largest dimension), then the C-order values.
Decoding is a zero-copy `np.frombuffer` view over the sample bytes.
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache
from typing import Any

import numpy as np

from streaming.errors import ShardCorruptError, UnknownEncodingError
from streaming.format.encodings.encoding import Encoding, FileBytes

DTYPE_CODES: dict[str, int] = {
    "uint8": 8, "int8": 9,
    "uint16": 16, "int16": 17, "float16": 18,
    "uint32": 32, "int32": 33, "float32": 34,
    "uint64": 64, "int64": 65, "float64": 66,
}
_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in DTYPE_CODES}
_BY_CODE = {code: _DTYPES[name] for name, code in DTYPE_CODES.items()}
_CODE_OF = {dtype: DTYPE_CODES[name] for name, dtype in _DTYPES.items()}
_WIDTH_DTYPES = [np.dtype(f"<u{1 << w}") for w in range(4)]
_MAX_NDIM = 63  # ndim lives in the upper six bits of the header byte


def _width_code(largest: int) -> int:
    if largest < 1 << 8:
        return 0
    if largest < 1 << 16:
        return 1
    if largest < 1 << 32:
        return 2
    return 3


def encode_shape(shape: tuple[int, ...]) -> bytes:
    """The shape header: `(ndim << 2) | width` then each dimension at that width."""
    w = _width_code(max(shape))
    return bytes([(len(shape) << 2) | w]) + np.asarray(shape, _WIDTH_DTYPES[w]).tobytes()


@lru_cache(maxsize=256)
def _dims_struct(head: int) -> struct.Struct:
    return struct.Struct("<" + "BHIQ"[head & 3] * (head >> 2))


def decode_shape(data: memoryview | bytes, offset: int) -> tuple[tuple[int, ...], int]:
    """Read a shape header at `offset`; return the shape and the offset just past it."""
    dims = _dims_struct(data[offset])
    return dims.unpack_from(data, offset + 1), offset + 1 + dims.size


class NDArrayEncoding(Encoding):
    """One of the three ndarray flavours, chosen by which of dtype/shape the name fixes."""

    def __init__(self, name: str, dtype: str | None = None, shape: tuple[int, ...] | None = None):
        self.name = name
        self.dtype = _DTYPES[dtype] if dtype is not None else None
        self.shape = shape
        self.size = None
        if self.dtype is not None and shape is not None:
            self.size = math.prod(shape) * self.dtype.itemsize

    def _check(self, value: Any) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise self.fail(value, "expected a numpy.ndarray")
        if value.ndim == 0 or value.size == 0:
            raise self.fail(value, f"empty or 0-d arrays are not encodable (shape {value.shape})")
        if value.ndim > _MAX_NDIM:
            raise self.fail(value, f"at most {_MAX_NDIM} dimensions, got {value.ndim}")
        dtype = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
        if self.dtype is None:
            if dtype not in _CODE_OF:
                raise self.fail(value, f"dtype {value.dtype} is not one of {sorted(DTYPE_CODES)}")
        elif dtype != self.dtype:
            raise self.fail(value, f"dtype {value.dtype} differs from the column's {self.dtype}")
        if self.shape is not None and value.shape != self.shape:
            raise self.fail(value, f"shape {value.shape} differs from the column's {self.shape}")
        return value

    def encode(self, value: Any) -> bytes:
        array = self._check(value)
        dtype = array.dtype.newbyteorder("<")
        parts = []
        if self.dtype is None:
            parts.append(bytes([_CODE_OF[dtype]]))
        if self.shape is None:
            parts.append(encode_shape(array.shape))
        parts.append(array.astype(dtype, copy=False).tobytes())
        return b"".join(parts)

    def decode(self, data: memoryview | bytes) -> np.ndarray:
        offset = 0
        dtype = self.dtype
        if dtype is None:
            dtype = _BY_CODE.get(data[0])
            if dtype is None:
                raise ShardCorruptError(f"unknown ndarray dtype code {data[0]}")
            offset = 1
        shape = self.shape
        if shape is None:
            shape, offset = decode_shape(data, offset)
        if len(shape) == 1:
            return np.frombuffer(data, dtype, shape[0], offset)
        return np.frombuffer(data, dtype, math.prod(shape), offset).reshape(shape)

    def decode_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray) -> list[Any]:
        """Fixed dtype: every value is a slice of a typed view of the file. Values whose header
        is not a plain 1-d shape that exactly fills the span go through `decode` one by one."""
        dtype = self.dtype
        if dtype is None or not len(starts):
            return super().decode_many(file, starts, ends)
        if self.shape is not None:
            begin, count = starts, np.full(len(starts), math.prod(self.shape), np.int64)
            plain = ends - starts == self.size
        else:
            raw = file.gather(starts, 9)
            head = raw[:, 0]
            code = head & 3
            begin = starts + 1 + (1 << code.astype(np.int64))
            count = _dims(np.ascontiguousarray(raw[:, 1:]), code)
            plain = (head >> 2 == 1) & (begin + count * dtype.itemsize == ends)
        values = _slices(file, dtype, begin, count)
        if self.shape is not None and len(self.shape) > 1:
            values = [v.reshape(self.shape) for v in values]
        if not plain.all():
            view = file.view
            for k in np.flatnonzero(~plain).tolist():
                values[k] = self.decode(view[int(starts[k]):int(ends[k])])
        return values


_WIDTH_MASKS = np.array([0xFF, 0xFFFF, 0xFFFF_FFFF, (1 << 64) - 1], np.uint64)
_U64 = np.dtype("<u8")


def _dims(raw: np.ndarray, width_code: np.ndarray) -> np.ndarray:
    """The first dimension of each shape header: the little-endian u8/u16/u32/u64 at raw[i]
    (capped at 2**40, so garbage cannot overflow the span arithmetic)."""
    dims = raw.view(_U64).ravel() & _WIDTH_MASKS[width_code]
    return np.minimum(dims, np.uint64(1 << 40)).astype(np.int64)


def _slices(file: FileBytes, dtype: np.dtype, begin: np.ndarray, count: np.ndarray
            ) -> list[np.ndarray]:
    """`count[i]` values of `dtype` from byte `begin[i]`, each a slice of a cached typed view."""
    size = dtype.itemsize
    shift = begin % size
    first = (begin - shift) // size
    views = [file.typed(dtype, s) for s in range(size)]
    return [views[s][a:b] for s, a, b in
            zip(shift.tolist(), first.tolist(), (first + count).tolist())]


def parse_ndarray_name(name: str) -> NDArrayEncoding:
    """Build the encoding for `ndarray[:dtype[:d0,d1,...]]`; bad names -> UnknownEncodingError."""
    parts = name.split(":")
    if parts[0] != "ndarray" or len(parts) > 3:
        raise UnknownEncodingError(f"unknown encoding {name!r}")
    dtype = parts[1] if len(parts) > 1 else None
    if dtype is not None and dtype not in DTYPE_CODES:
        raise UnknownEncodingError(
            f"unknown encoding {name!r}: dtype {dtype!r} is not one of {sorted(DTYPE_CODES)}"
        )
    shape = None
    if len(parts) == 3:
        try:
            shape = tuple(int(d) for d in parts[2].split(","))
        except ValueError:
            raise UnknownEncodingError(f"unknown encoding {name!r}: bad shape") from None
        if not shape or len(shape) > _MAX_NDIM or min(shape) < 1:
            raise UnknownEncodingError(f"unknown encoding {name!r}: shape must be positive")
    return NDArrayEncoding(name, dtype, shape)
