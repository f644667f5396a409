"""Bulk writes go to the kernel in slices of at most WRITE_SLICE bytes, and lose nothing."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.util import pagewrite
from streaming.util.atomic import atomic_write_bytes
from streaming.util.pagewrite import WRITE_SLICE, pwrite_sliced, write_sliced


class Recorder(io.RawIOBase):
    """A writable raw file that records the size of every write it receives."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.sizes.append(len(b))
        self.data += bytes(b)
        return len(b)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 3 * WRITE_SLICE + 17))
def test_every_byte_arrives_in_order_in_bounded_slices(size: int) -> None:
    data = os.urandom(size)
    out = Recorder()
    assert write_sliced(out, data) == size
    assert bytes(out.data) == data
    assert all(0 < n <= WRITE_SLICE for n in out.sizes)
    assert len(out.sizes) == -(-size // WRITE_SLICE)


def test_arrays_and_memoryviews_are_written_as_their_bytes(tmp_path) -> None:
    values = np.arange(WRITE_SLICE, dtype=np.int32)  # 4 slices' worth, item size 4
    path = tmp_path / "a.bin"
    with open(path, "wb") as out:
        assert write_sliced(out, memoryview(values)) == values.nbytes
    assert path.read_bytes() == values.tobytes()


def test_pwrite_fills_a_file_at_offsets_and_survives_short_writes(tmp_path, monkeypatch) -> None:
    data = os.urandom(2 * WRITE_SLICE + 5)
    real, calls = os.pwrite, []

    def short(fd, view, offset):  # the kernel may write less than asked
        calls.append(len(view))
        return real(fd, view[: max(1, len(view) // 3)], offset)

    monkeypatch.setattr(pagewrite.os, "pwrite", short)
    path = tmp_path / "b.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 10 + len(data))
        assert pwrite_sliced(fd, data, 10) == len(data)
    finally:
        os.close(fd)
    assert path.read_bytes() == bytes(10) + data
    assert max(calls) <= WRITE_SLICE


def test_whole_file_writes_go_through_the_slicer(tmp_path, monkeypatch) -> None:
    sizes: list[int] = []
    real = pagewrite.write_sliced

    def spy(handle, data):
        sizes.append(len(memoryview(data).cast("B")))
        return real(handle, data)

    monkeypatch.setattr("streaming.util.atomic.write_sliced", spy)
    data = os.urandom(WRITE_SLICE * 2)
    atomic_write_bytes(tmp_path / "c.bin", data)
    assert sizes == [len(data)]
    assert (tmp_path / "c.bin").read_bytes() == data


def test_a_write_that_makes_no_progress_raises_instead_of_spinning() -> None:
    class Stuck(Recorder):
        def write(self, b) -> int:
            return 0

    with pytest.raises(OSError, match="made no progress"):
        write_sliced(Stuck(), b"abc")


def test_short_writes_of_an_unbuffered_file_are_resumed() -> None:
    class Short(Recorder):
        def write(self, b) -> int:
            return super().write(b[: max(1, len(b) // 3)])

    data = os.urandom(WRITE_SLICE + 1000)
    out = Short()
    assert write_sliced(out, data) == len(data)
    assert bytes(out.data) == data
