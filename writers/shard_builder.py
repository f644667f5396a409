"""Accumulate one MDS shard's encoded samples in a reusable buffer and apply the flush rule.

The running size counts what the finished raw file will hold: the sample count, the first offset
and the config JSON once, then four offset bytes plus the encoded bytes per sample.

Samples are copied into an anonymous memory map (pages are only committed when touched, with no
up-front zeroing) after a reserved gap, and the header (whose
length depends on the sample count) is written into that gap at the end, so a finished shard is
one contiguous view with no further copy. Buffers come back through `recycle()` once written, so
their pages are already mapped when reused.
"""

from __future__ import annotations

import mmap
from array import array
from collections import deque

import numpy as np

from streaming.errors import EncodeError

# Offsets are u32, so no raw shard may reach 4 GiB whatever size_limit says.
MAX_SHARD_BYTES = (1 << 32) - 1
_FIRST_CAPACITY = 1 << 26


class ShardBuilder:
    """The shard being filled: sample bytes in a memory buffer plus their end offsets."""

    def __init__(self, config_json: bytes, size_limit: int | None) -> None:
        self._config = config_json
        self._limit = MAX_SHARD_BYTES if size_limit is None else min(size_limit, MAX_SHARD_BYTES)
        self._capacity = min(self._limit, _FIRST_CAPACITY)
        self._reserve = 8 + len(config_json) + 4096  # grows with the samples per shard
        self._free: deque[mmap.mmap] = deque()
        self._start_shard()

    def _start_shard(self) -> None:
        want = self._reserve + self._capacity
        buf = self._free.pop() if self._free else None
        if buf is None or len(buf) < want:
            buf = mmap.mmap(-1, want)
        self._buf = buf
        self._pos = self._reserve
        self._ends = array("q")
        self.size = 8 + len(self._config)

    @property
    def samples(self) -> int:
        """Samples added since the last take()."""
        return len(self._ends)

    def fits(self, nbytes: int) -> bool:
        """Whether a sample of `nbytes` keeps the shard within the size limit."""
        return self.size + nbytes + 4 <= self._limit

    def add(self, encoded: bytes | bytearray | memoryview) -> None:
        """Append one encoded sample (callers check fits() first, except for an oversize one)."""
        n = len(encoded)
        self.size += n + 4
        if self.size > MAX_SHARD_BYTES:
            raise EncodeError(
                f"a sample of {n} bytes does not fit in an MDS shard "
                f"(u32 offsets cap a raw shard at {MAX_SHARD_BYTES} bytes)"
            )
        end = self._pos + n
        if end > len(self._buf):
            self._grow(end)
        self._buf[self._pos : end] = encoded
        self._pos = end
        self._ends.append(end)

    def _grow(self, needed: int) -> None:
        bigger = mmap.mmap(-1, max(needed, 2 * len(self._buf)))
        bigger[: self._pos] = memoryview(self._buf)[: self._pos]
        self._buf = bigger

    def take(self) -> tuple[memoryview, mmap.mmap, int]:
        """Finish the shard: (its raw bytes, the buffer to recycle() once written, samples)."""
        count = len(self._ends)
        header_len = 4 + 4 * (count + 1) + len(self._config)
        shift = header_len - self._reserve  # file offset = buffer offset + shift
        offsets = np.empty(count + 2, dtype="<u4")
        offsets[0] = count
        offsets[1] = header_len
        if count:
            offsets[2:] = np.frombuffer(self._ends, dtype=np.int64) + shift
        header = offsets.tobytes() + self._config
        buf, pos = self._buf, self._pos
        if header_len <= self._reserve:
            start = self._reserve - header_len
            buf[start : self._reserve] = header
            raw = memoryview(buf)[start:pos]
        else:  # more samples than the gap was sized for: one copy, and a larger gap next time
            raw = memoryview(header + memoryview(buf)[self._reserve : pos])
        self._reserve = max(self._reserve, header_len + header_len // 4)
        self._start_shard()
        return raw, buf, count

    def recycle(self, buf: mmap.mmap) -> None:
        """Give back a buffer from take() once nothing reads it any more (thread-safe)."""
        if len(self._free) < 2:
            self._free.append(buf)
