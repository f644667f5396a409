"""The Encoding protocol of every column codec: name, fixed size or None, encode, decode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streaming.errors import EncodeError


class FileBytes:
    """One file's bytes prepared for batch decoding: the raw buffer (mmap or bytes), a uint8
    view, and cached typed views at each byte shift, so a value is a basic slice of a view
    rather than a new `np.frombuffer` per sample (which costs several times more)."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer
        self.view = memoryview(buffer)
        self.u8 = np.frombuffer(buffer, np.uint8)
        self._typed: dict[tuple[np.dtype, int], np.ndarray] = {}

    def typed(self, dtype: np.dtype, shift: int) -> np.ndarray:
        """The file from byte `shift` on, viewed as `dtype` (unaligned when shift is odd)."""
        view = self._typed.get((dtype, shift))
        if view is None:
            count = max(len(self.u8) - shift, 0) // dtype.itemsize
            view = self.u8[shift:shift + count * dtype.itemsize].view(dtype)
            self._typed[(dtype, shift)] = view
        return view

    def gather(self, starts: np.ndarray, width: int) -> np.ndarray:
        """`width` bytes from each start as an [n, width] uint8 array (indices past the end are
        clamped; callers check spans before trusting such values)."""
        index = starts[:, None] + np.arange(width)
        np.minimum(index, len(self.u8) - 1, out=index)
        return self.u8[index]


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

    def decode_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray
                    ) -> Sequence[Any]:
        """Decode the values at `file[starts[i]:ends[i]]` (int64 arrays) of many samples at once.

        The default decodes one by one; families override it with vectorised versions.
        """
        view = file.view
        decode = self.decode
        return [decode(view[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]

    def view_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray
                  ) -> Sequence[Any]:
        """`decode_many`, except that values may be zero-copy views of `file` where the
        family has them (they keep its buffer alive): for a consumer that copies them at once,
        such as a DataLoader worker's shared-memory transport."""
        return self.decode_many(file, starts, ends)

    def __repr__(self) -> str:
        return f"<Encoding {self.name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encoding) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def fail(self, value: Any, why: str) -> EncodeError:
        """Build an EncodeError naming this encoding and the offending value's type."""
        return EncodeError(f"cannot encode {type(value).__name__} as {self.name!r}: {why}")
