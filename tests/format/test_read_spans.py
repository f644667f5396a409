"""read_spans: positional gathers, and RWF_NOWAIT reads that refuse to wait for the disk."""

from __future__ import annotations

import os

import numpy as np
import pytest

from streaming.format.shard import NOWAIT_READS, read_spans, read_spans_into

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


def test_spans_land_at_scattered_places_of_a_given_buffer(tmp_path) -> None:
    """read_spans_into puts each span where lo/hi say (the pinned path lays a chunk out in plan
    order while reading one shard at a time); a run is one read only where it is contiguous in
    the file and in the buffer."""
    data = _file(tmp_path / "a")
    starts, ends = _spans(len(data), 50)
    starts[:10] = np.arange(10) * 100 + 900  # a file-contiguous run of ten spans...
    ends[:10] = starts[:10] + 100
    sizes = ends - starts
    order = np.random.default_rng(1).permutation(len(starts))  # ...scattered in the buffer
    order[:10] = np.arange(10)  # except the run's first ten, kept contiguous there too
    rest = np.setdiff1d(np.arange(len(starts)), order[:10])
    order[10:] = np.random.default_rng(2).permutation(rest)
    places = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(sizes[order], out=places[1:])
    lo, hi = np.empty(len(starts), np.int64), np.empty(len(starts), np.int64)
    lo[order], hi[order] = places[:-1], places[1:]
    buffer = bytearray(int(places[-1]))
    reads = []
    real = os.preadv

    def counting(fd, buffers, offset, flags=0):
        reads.append(offset)
        return real(fd, buffers, offset, flags)

    fd = os.open(tmp_path / "a", os.O_RDONLY)
    try:
        os.preadv = counting
        read_spans_into(memoryview(buffer), [fd], np.zeros(len(starts), np.int64), starts, ends,
                        lo, hi)
    finally:
        os.preadv = real
        os.close(fd)
    for k in range(len(starts)):
        assert bytes(buffer[lo[k]:hi[k]]) == data[starts[k]:ends[k]]
    assert 900 in reads and 1000 not in reads  # the ten spans were one read
    assert len(reads) <= len(starts) - 9
