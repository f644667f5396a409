"""The Encoding protocol of every column codec: name, fixed size or None, encode, decode."""

from __future__ import annotations

from typing import Any

from streaming.errors import EncodeError


class Encoding:
    """One column encoding: turns a value into bytes and back.

    `size` is the fixed byte size of every encoded value, or None when values vary in size
    (variable columns get a u32 length prefix inside each sample). `unsafe` marks encodings
    whose decode can run arbitrary code (pickle).
    """

    name: str = ""
    size: int | None = None
    unsafe: bool = False

    def encode(self, value: Any) -> bytes:
        """Serialise one value; raise EncodeError if the value does not fit this encoding."""
        raise NotImplementedError

    def decode(self, data: memoryview | bytes) -> Any:
        """Deserialise one value from exactly the bytes `encode` produced."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Encoding {self.name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encoding) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def fail(self, value: Any, why: str) -> EncodeError:
        """Build an EncodeError naming this encoding and the offending value's type."""
        return EncodeError(f"cannot encode {type(value).__name__} as {self.name!r}: {why}")
