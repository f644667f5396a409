"""Accumulate one MDS shard's encoded samples in a growing buffer and apply the flush rule.

The running size counts what the finished raw file will hold: the sample count, the first offset
and the config JSON once, then four offset bytes plus the encoded bytes per sample.
"""

from __future__ import annotations

from array import array

import numpy as np

from streaming.errors import EncodeError

# Offsets are u32, so no raw shard may reach 4 GiB whatever size_limit says.
MAX_SHARD_BYTES = (1 << 32) - 1


class ShardBuilder:
    """The shard being filled: one bytearray of sample bytes plus their end offsets."""

    __slots__ = ("_config", "_data", "_ends", "_limit", "size")

    def __init__(self, config_json: bytes, size_limit: int | None) -> None:
        self._config = config_json
        self._limit = MAX_SHARD_BYTES if size_limit is None else min(size_limit, MAX_SHARD_BYTES)
        self._reset()

    def _reset(self) -> None:
        self._data = bytearray()
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
        self._data += encoded
        self._ends.append(len(self._data))
        self.size += len(encoded) + 4
        if self.size > MAX_SHARD_BYTES:
            raise EncodeError(
                f"a sample of {len(encoded)} bytes does not fit in an MDS shard "
                f"(u32 offsets cap a raw shard at {MAX_SHARD_BYTES} bytes)"
            )

    def take(self) -> tuple[bytes, bytearray, int]:
        """Return (header, data, samples) of the finished shard and start an empty one."""
        count = len(self._ends)
        base = 4 + 4 * (count + 1) + len(self._config)
        offsets = np.empty(count + 2, dtype="<u4")
        offsets[0] = count
        offsets[1] = base
        if count:
            offsets[2:] = np.frombuffer(self._ends, dtype=np.int64) + base
        header = offsets.tobytes() + self._config
        data = self._data
        self._reset()
        return header, data, count
