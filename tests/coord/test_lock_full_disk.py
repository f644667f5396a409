"""A lock file on a disk that is full (a real tmpfs, root only): taking the lock raises the typed
DiskFullError naming the lock file, not a bare OSError, and leaves neither the lock held nor its
file behind."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from streaming.coord.lock import FileLock
from streaming.errors import DiskFullError
from tests.support.smalldisk import small_disk


def _fill(folder: Path) -> None:
    with (folder / "filler").open("wb") as out:
        try:
            while True:
                out.write(bytes(1 << 16))
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_a_lock_on_a_full_disk_is_a_disk_full_error_naming_the_lock() -> None:
    with small_disk("1m") as disk:
        (disk / "x.lock").touch()  # the file exists; writing its owner needs a block
        _fill(disk)
        lock = FileLock(disk / "x.lock", timeout=5)
        with pytest.raises(DiskFullError, match=r"x\.lock"):
            lock.acquire()
        assert not lock.held
        assert not (disk / "x.lock").exists()
