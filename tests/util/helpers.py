"""glibc's mallinfo2, for the worker-setup tests and the fresh interpreters they start (this
module imports neither torch nor the tests, so such a probe starts in a fraction of a second)."""

from __future__ import annotations

import ctypes


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def own_mapping(size: int = 8 << 20) -> bool:
    """Whether malloc serves a `size`-byte buffer with a mapping of its own (glibc's
    mallinfo2: hblks counts blocks allocated with mmap).

    Args:
        size: The buffer's size in bytes.
    """
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _MallInfo2
    before = mallinfo2().hblks
    buffer = bytearray(size)
    grew = mallinfo2().hblks > before
    del buffer
    return grew
