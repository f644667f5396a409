"""One producer per file per node: an fcntl lock file beside the destination.

The lock dies with its holder (kernel-released), so a crashed download never blocks others."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from streaming.errors import DownloadTimeoutError
from streaming.util.confine import open_regular


def lock_path_for(dest: Path) -> Path:
    """The hidden lock file that guards producing `dest`."""
    return dest.parent / f".{dest.name}.lock"


def _try_lock(lock: Path) -> int | None:
    """An fd holding the lock on the file currently at `lock`, or None if someone else holds it."""
    fd = open_regular(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # A previous holder may have unlinked the file after we opened it: then we locked a ghost.
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                return fd
    except BlockingIOError:
        pass
    os.close(fd)
    return None


@contextlib.contextmanager
def single_flight(dest: str | os.PathLike, *, deadline: float) -> Iterator[None]:
    """Hold the node-wide lock for producing `dest` (any process) until the block exits.

    Waits until `deadline` (a time.monotonic() value), then raises DownloadTimeoutError."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path_for(dest)
    pause = 0.005
    while (fd := _try_lock(lock)) is None:
        if time.monotonic() > deadline:
            raise DownloadTimeoutError(f"{dest}: another process still held its download lock")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)
