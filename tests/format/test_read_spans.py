"""read_spans: positional gathers, and RWF_NOWAIT reads that refuse to wait for the disk."""

from __future__ import annotations

import os

import numpy as np
import pytest

from streaming.format.shard import NOWAIT_READS, read_spans

needs_nowait = pytest.mark.skipif(not NOWAIT_READS, reason="no RWF_NOWAIT on this platform")


def _file(path, size: int = 1 << 20) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def _spans(size: int, count: int = 200):
    rng = np.random.default_rng(0)
    starts = np.sort(rng.integers(0, size - 5000, count))
    return starts, starts + rng.integers(1, 5000, count)


def test_gathers_spans_in_order_and_merges_neighbours(tmp_path) -> None:
    data = _file(tmp_path / "a")
    starts, ends = _spans(len(data))
    starts[1] = ends[0]  # file-contiguous neighbours become one read
    fd = os.open(tmp_path / "a", os.O_RDONLY)
    try:
        buffer, lo, hi = read_spans([fd], np.zeros(len(starts), np.int64), starts, ends)
    finally:
        os.close(fd)
    got = bytes(buffer.buffer)
    for k in range(len(starts)):
        assert got[lo[k]:hi[k]] == data[starts[k]:ends[k]]


@needs_nowait
def test_nowait_reads_what_the_page_cache_holds(tmp_path) -> None:
    data = _file(tmp_path / "a")
    starts, ends = _spans(len(data))
    fd = os.open(tmp_path / "a", os.O_RDONLY)
    try:
        buffer, lo, hi = read_spans([fd], np.zeros(len(starts), np.int64), starts, ends,
                                    nowait=True)
    finally:
        os.close(fd)
    assert bytes(buffer.buffer)[lo[7]:hi[7]] == data[starts[7]:ends[7]]


@needs_nowait
def test_nowait_refuses_bytes_that_would_come_from_the_disk(tmp_path) -> None:
    _file(tmp_path / "a", 8 << 20)
    fd = os.open(tmp_path / "a", os.O_RDONLY)
    try:
        os.fsync(fd)  # clean pages can be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        try:
            os.preadv(fd, [bytearray(4096)], 4 << 20, os.RWF_NOWAIT)
            pytest.skip("this filesystem kept the pages (tmpfs?): nothing to refuse")
        except BlockingIOError:
            pass
        starts, ends = _spans(8 << 20)
        with pytest.raises(BlockingIOError):
            read_spans([fd], np.zeros(len(starts), np.int64), starts, ends, nowait=True)
        buffer, _, _ = read_spans([fd], np.zeros(len(starts), np.int64), starts, ends)
        assert len(buffer.buffer) == int((ends - starts).sum())  # a blocking read still works
    finally:
        os.close(fd)
