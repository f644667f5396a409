"""Fixed-size numeric encodings: `int` (Python int via int64) and numpy scalars uint8..float64."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from streaming.format.encodings.encoding import Encoding, FileBytes

_INT64 = np.dtype("<i8")

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _is_integral(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class IntEncoding(Encoding):
    """`int`: eight little-endian bytes of an int64; decodes to a Python int."""

    name = "int"
    size = 8

    def encode(self, value: Any) -> bytes:
        if not _is_integral(value):
            raise self.fail(value, "expected an integer")
        value = int(value)
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise self.fail(value, f"{value} is outside the int64 range")
        return value.to_bytes(8, "little", signed=True)

    def decode(self, data: memoryview | bytes) -> int:
        return int.from_bytes(data, "little", signed=True)

    def decode_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray) -> list[int]:
        return file.gather(starts, 8).view(_INT64).ravel().tolist()


class NumpyScalarEncoding(Encoding):
    """`uint8`..`uint64`, `int8`..`int64`, `float16/32/64`: a numpy scalar, little-endian."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = np.dtype(name).newbyteorder("<")
        self.size = self.dtype.itemsize
        self._integer = self.dtype.kind in "iu"
        if self._integer:
            info = np.iinfo(self.dtype)
            self._lo, self._hi = int(info.min), int(info.max)

    def encode(self, value: Any) -> bytes:
        if self._integer:
            if not _is_integral(value):
                raise self.fail(value, "expected an integer")
            if not self._lo <= int(value) <= self._hi:
                raise self.fail(value, f"{int(value)} is outside [{self._lo}, {self._hi}]")
        elif not isinstance(value, (numbers.Real, np.floating, np.integer)) or isinstance(
            value, (bool, np.bool_)
        ):
            raise self.fail(value, "expected a real number")
        return np.asarray(value, dtype=self.dtype).tobytes()

    def decode(self, data: memoryview | bytes) -> np.generic:
        return np.frombuffer(data, self.dtype, 1)[0]

    def decode_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        # Iterating the array yields numpy scalars, exactly what `decode` returns.
        return file.gather(starts, self.size).view(self.dtype).ravel()


SCALAR_NAMES = (
    "uint8", "uint16", "uint32", "uint64",
    "int8", "int16", "int32", "int64",
    "float16", "float32", "float64",
)


def scalar_encodings() -> dict[str, Encoding]:
    """Every encoding of this family, keyed by name."""
    found: dict[str, Encoding] = {"int": IntEncoding()}
    found.update({name: NumpyScalarEncoding(name) for name in SCALAR_NAMES})
    return found
