"""Write large buffers to files in slices of at most 256 KiB.

On this project's VMs (Linux 6.18, ext4, a balloon that hands free memory back to the host) the
kernel's copy into the page cache often ran several times slower for writes of 1-2 MiB than
for writes of 256 KiB: 0.82-3.70 CPU-s per GiB in 2 MiB writes against 0.27-0.42, every byte the
same (docs/performance.md; whole epochs gained in some A/B runs, not in others).
The likely cause: a large write gets large page-cache folios, carved from the free 2 MiB blocks
the host has taken back, so the copy stalls while the host backs them again. Slicing costs a few
more system calls and nothing else, so every bulk write of shard bytes goes through here.
"""

from __future__ import annotations

import os
from typing import BinaryIO

WRITE_SLICE = 256 << 10  # bytes per write(2); 1 MiB writes already show the stalls


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
