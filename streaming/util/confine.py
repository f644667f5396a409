"""The one guard every create, rename and removal under a cache or dataset folder passes: the
path must resolve (symbolic links followed, whatever part of it they stand in) to a place
strictly inside the folder. Names come from indexes that remote parties write; a name that
passed `format.index_entries.check_basename` is relative and never climbs, so only links can
still lead out, and those are caught here."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from streaming.errors import UnsafePathError

WRITING = "nothing there is created, replaced or removed"
READING = "nothing there is read"


def confine(root: str | os.PathLike, path: str | os.PathLike, *, spared: str = WRITING) -> Path:
    """`path` itself, once it is known to resolve strictly inside folder `root`.

    Args:
        root: the cache or dataset folder the path must stay in.
        path: the file about to be created, renamed or removed (or read: see `spared`).
        spared: what the error says was not done (WRITING, or READING for a remote's file).

    Raises:
        UnsafePathError: naming the path, where it resolves and the folder.
    """
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UnsafePathError(
            f"{os.fspath(path)} resolves to {real}, outside the folder {os.fspath(root)} "
            f"({real_root}): refused (a name from an index, or a symbolic link in the folder, "
            f"leads out of it; {spared})")
    return Path(path)


def remove(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Remove file `path` under folder `root` if it is there; True when it was removed.

    Args:
        root: the cache or dataset folder the path must stay in.
        path: the file to remove.

    Raises:
        UnsafePathError: `path` resolves outside `root`.
    """
    confine(root, path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        return True
    return False


def open_regular(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """A descriptor of the regular file at `path`, opened with `flags` but never through a
    symbolic link in its last component (O_NOFOLLOW: a planted link is refused, not followed,
    so its target is neither created, truncated nor written) and never on a FIFO, socket or
    device (O_NONBLOCK while opening, so a planted FIFO cannot stall the open).

    Lock and bookkeeping files beside the shards (`.streaming-origin.lock`, `.<shard>.lock`,
    `.<shard>.prep.lock`, the node lock) are opened through here; the folders above them
    pass `confine` first.

    Args:
        path: the file to open.
        flags: os.open flags (O_RDWR | O_CREAT, ...).
        mode: permission bits of a new file before the umask.

    Raises:
        UnsafePathError: `path` is a symbolic link or not a regular file.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(
                f"{os.fspath(path)} is a symbolic link: refused (this library's lock and "
                "bookkeeping files are never opened through a link, which could lead to any "
                "file of this user's)") from None
        raise
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise UnsafePathError(
                f"{os.fspath(path)} is not a regular file (mode {stat.filemode(kind)}): "
                "refused as a lock or bookkeeping file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_inside(root: str | os.PathLike, path: str | os.PathLike, flags: int,
                mode: int = 0o666) -> int:
    """`open_regular(path, ...)` once `confine(root, path)` has passed.

    Args:
        root: the cache or dataset folder the file must stay in.
        path: the file to open.
        flags: os.open flags.
        mode: permission bits of a new file before the umask.

    Raises:
        UnsafePathError: the path leads out of `root`, is a link or not a regular file.
    """
    confine(root, path)
    return open_regular(path, flags, mode)


def read_regular(path: str | os.PathLike, limit: int = 1 << 20) -> bytes:
    """The bytes of the small bookkeeping file at `path` (an origin or node record), read
    through `open_regular`: a link, FIFO or device planted there is refused, not read.

    Args:
        path: the file to read.
        limit: the most bytes a record may hold; a larger file is an error.

    Raises:
        UnsafePathError: `path` is a symbolic link or not a regular file.
        ValueError: the file holds more than `limit` bytes.
    """
    fd = open_regular(path, os.O_RDONLY)
    try:
        data = os.pread(fd, limit + 1, 0)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"{os.fspath(path)}: more than {limit} bytes, not a record of ours")
    return data
