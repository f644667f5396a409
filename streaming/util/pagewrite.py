"""Write large buffers to files in slices of at most 256 KiB.

A single write(2) of a few MiB lets the kernel back it with large page-cache folios; on hosts
that reclaim free guest memory (memory ballooning) the copy into those folios can stall while
the host backs the memory again, so large writes cost several times the CPU of small ones.
Slicing costs a few more system calls and nothing else, so every bulk write of shard bytes goes
through here.
"""

from __future__ import annotations

import os
from typing import BinaryIO

WRITE_SLICE = 256 << 10  # bytes per write(2), small enough to stay clear of large folios


def write_sliced(handle: BinaryIO, data: bytes | bytearray | memoryview) -> int:
    """Write all of `data` to the binary file `handle`; returns the bytes written. Loops over
    short writes, which an unbuffered file may return."""
    view = memoryview(data).cast("B")
    size, pos = len(view), 0
    while pos < size:
        pos += _progress(handle.write(view[pos:pos + WRITE_SLICE]), handle)
    return size


def pwrite_sliced(fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
    """Write all of `data` to the file descriptor `fd` at `offset`; returns the bytes written.
    Loops over short writes, which pwrite(2) may return."""
    view = memoryview(data).cast("B")
    size = len(view)
    while view:
        written = _progress(os.pwrite(fd, view[:WRITE_SLICE], offset), fd)
        view, offset = view[written:], offset + written
    return size


def _progress(written: int | None, where: object) -> int:
    if not written:  # 0 or None (would block): looping again would spin forever
        raise OSError(f"write to {getattr(where, 'name', where)!r} made no progress")
    return written
