"""Inter-process exclusive file lock with a deadline; a timeout names the file and the holder.

Built on flock (see `files.py`): the kernel releases it when the holder dies, and the holder's
pid is written into the file so a waiter that gives up can say who it waited for.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from pathlib import Path

from streaming.coord.proc import ProcessId
from streaming.coord.shm_files import names_inode, try_flock
from streaming.coord.wait import wait_for
from streaming.errors import DeadlineExceeded
from streaming.util.confine import open_regular
from streaming.util.disk_full import naming_full_disk


def _release(fd: int, path: Path, holder: int) -> None:
    """Remove the lock file and drop the flock; a forked child must leave its parent's lock."""
    if os.getpid() != holder:
        return
    with contextlib.suppress(OSError):
        if names_inode(path, fd):
            os.unlink(path)  # removed while still held, so no waiter can get a stale inode
    os.close(fd)


PRIVATE = 0o600
LIKE_ANY_FILE = 0o666


class FileLock:
    """An exclusive lock on `path` shared by every process (and thread) that opens it.

    Args:
        path: the lock file, created when missing (never through a symbolic link, and only
            as a regular file: UnsafePathError otherwise).
        timeout: seconds `acquire` waits by default.
        mode: permission bits of a new lock file before the umask: `PRIVATE` (the default, for
            locks in the shared-memory folder, which other users must not hold) or
            `LIKE_ANY_FILE` for locks in a folder a team may share, so colleagues can take it.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 60.0,
                 mode: int = PRIVATE) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.mode = mode
        self._finalizer: weakref.finalize | None = None

    @property
    def held(self) -> bool:
        """Whether this object currently holds the lock."""
        return self._finalizer is not None and self._finalizer.alive

    def try_acquire(self) -> bool:
        """Take the lock if it is free right now; never blocks."""
        if self.held:
            raise RuntimeError(f"lock {self.path} is already held by this FileLock")
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, self.mode)
        if not try_flock(fd) or not names_inode(self.path, fd):
            os.close(fd)
            return False
        me = ProcessId.current()
        owner = f"{me.pid} {me.start}\n".encode()
        try:
            with naming_full_disk(self.path, len(owner)):
                os.ftruncate(fd, 0)
                os.pwrite(fd, owner, 0)
        except BaseException:
            _release(fd, self.path, me.pid)  # held: remove the file, then drop the flock
            raise
        self._finalizer = weakref.finalize(self, _release, fd, self.path, me.pid)
        return True

    def acquire(self, timeout: float | None = None) -> None:
        """Wait up to `timeout` seconds (default: the constructor's) for the lock."""
        seconds = self.timeout if timeout is None else timeout
        try:
            wait_for(self.try_acquire, what=f"lock {self.path}", timeout=seconds)
        except DeadlineExceeded as exc:
            holder = self.holder()
            who = f"held by {holder}" if holder else "holder unknown"
            raise DeadlineExceeded(f"{exc} ({who})") from None

    def release(self) -> None:
        """Give the lock up (no-op when not held)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None

    def holder(self) -> ProcessId | None:
        """The process that last wrote itself into the lock file, if any."""
        try:
            fd = open_regular(self.path, os.O_RDONLY)
        except OSError:  # gone, or not a file this library would have made
            return None
        try:
            text = os.pread(fd, 64, 0).split()
            return ProcessId(int(text[0]), int(text[1]))
        except (OSError, ValueError, IndexError):
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
