"""Compatibility path `streaming.base.format.mds.encodings`: custom column encodings the way
the reference registers them, and its encode/decode helpers.

    from streaming.base.format.mds.encodings import Encoding, _encodings

    class Complex(Encoding):
        size = 16
        def encode(self, obj): return np.complex128(obj).tobytes()
        def decode(self, data): return complex(np.frombuffer(data, np.complex128)[0])

    _encodings["complex"] = Complex

Assigning into `_encodings` registers the class with this library's encoding registry, so
`MDSWriter(columns={"z": "complex"})` and every reader know it. `decode` receives `bytes`.
"""

from __future__ import annotations

from typing import Any

from streaming.errors import UnknownEncodingError
from streaming.format.encodings import Encoding, get_encoding, known_encodings, register_encoding
from streaming.format.encodings.registry import is_known_encoding


class _UserEncoding(Encoding):
    """A reference-style encoding instance under the name it was registered with; its decode
    gets `bytes` (as in the reference) rather than a view of the shard."""

    def __init__(self, name: str, inner: Any) -> None:
        self.name = name
        self.inner = inner
        self.size = getattr(inner, "size", None)

    def encode(self, value: Any) -> bytes:
        return bytes(self.inner.encode(value))

    def decode(self, data: memoryview | bytes) -> Any:
        return self.inner.decode(bytes(data))


class _EncodingTable(dict):
    """`{name: Encoding class}` of every encoding; setting a key registers a new one."""

    def __setitem__(self, name: str, cls: Any) -> None:
        if not isinstance(cls, type) or not callable(getattr(cls, "encode", None)) or not \
                callable(getattr(cls, "decode", None)):
            raise UnknownEncodingError(f"_encodings[{name!r}] needs an Encoding class with "
                                       f"encode and decode, got {cls!r}")
        inner = cls()
        register_encoding(name, inner if isinstance(inner, Encoding) and inner.name == name
                          else _UserEncoding(name, inner))
        super().__setitem__(name, cls)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for name, cls in dict(*args, **kwargs).items():
            self[name] = cls


def _builtin_table() -> _EncodingTable:
    table = _EncodingTable()
    for name in known_encodings():
        dict.__setitem__(table, name, type(get_encoding(name)))
    return table


_encodings = _builtin_table()


def get_mds_encodings() -> set[str]:
    """Names of every registered encoding (`ndarray` variants are built on demand)."""
    return set(known_encodings()) | set(_encodings)


def is_mds_encoding(encoding: str) -> bool:
    """Whether `encoding` can be read and written."""
    return is_known_encoding(encoding)


def is_mds_encoding_safe(encoding: str) -> bool:
    """Whether decoding `encoding` cannot run arbitrary code (everything but `pkl`)."""
    return not get_encoding(encoding).unsafe


def get_mds_encoded_size(encoding: str) -> int | None:
    """Fixed byte size of values of `encoding`, or None when it varies."""
    return get_encoding(encoding).size


def mds_encode(encoding: str, obj: Any) -> bytes:
    """Encode one value (bytes are passed through unchanged, as in the reference)."""
    if isinstance(obj, bytes):
        return obj
    return get_encoding(encoding).encode(obj)


def mds_decode(encoding: str, data: bytes) -> Any:
    """Decode one value."""
    return get_encoding(encoding).decode(data)


__all__ = ["Encoding", "get_mds_encoded_size", "get_mds_encodings", "is_mds_encoding",
           "is_mds_encoding_safe", "mds_decode", "mds_encode"]
