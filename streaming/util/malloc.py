"""Let a process reuse the memory of the large buffers it frees instead of faulting in fresh pages.

A reading process allocates and frees buffers of 0.1-16 MB all the time: HTTP body chunks,
decompressed pieces, sample bytes, read spans. glibc serves blocks above its mmap threshold
(128 KiB at first, raised as such blocks are freed) with new mappings, and hands the free top
of a heap back to the kernel once it exceeds the trim threshold. Every reuse then faults in and
zeroes fresh pages, a large part of a reader's CPU. With both thresholds raised, freed blocks
stay in the heap for the next buffer, for some more resident memory.

A DataLoader worker hands its batches over through shared memory and keeps few values of its
own (`WORKER`); a training process reading its samples itself (no workers) makes every value
it hands out, a read or two ahead of the one in use, so its heap keeps more (`IN_PROCESS`).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


@dataclass(frozen=True)
class HeapTuning:
    """glibc malloc thresholds for one kind of reading process.

    Args:
        mmap_threshold: larger blocks still get their own mapping (and go back at free).
        trim_threshold: a heap keeps at most this much free memory at its top.
    """

    mmap_threshold: int
    trim_threshold: int


WORKER = HeapTuning(16 << 20, 32 << 20)
IN_PROCESS = HeapTuning(32 << 20, 128 << 20)  # 32 MiB: the highest glibc itself raises it to

_tuned_pid: int | None = None


def keep_buffers_in_heap(tuning: HeapTuning = WORKER) -> bool:
    """Raise glibc's mmap and trim thresholds for this process as `tuning` says; True when done.

    Does nothing off glibc, or when the environment already tunes glibc's malloc
    (`MALLOC_*_` variables or `glibc.malloc.*` in GLIBC_TUNABLES: the user's choice wins).

    Args:
        tuning: the thresholds (a worker's by default).
    """
    if any(name in os.environ for name in USER_SETTINGS):
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        os.confstr("CS_GNU_LIBC_VERSION")
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):  # not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not mallopt(M_MMAP_THRESHOLD, tuning.mmap_threshold):
        return False
    if not mallopt(M_TRIM_THRESHOLD, tuning.trim_threshold):
        return False
    global _tuned_pid
    _tuned_pid = os.getpid()
    return True


def tuned() -> bool:
    """Whether `keep_buffers_in_heap` tuned this process (a forked child inherits the tuning
    but reports False: it is the parent's)."""
    return _tuned_pid == os.getpid()
