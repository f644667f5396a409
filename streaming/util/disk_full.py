"""Turn the operating system's bare "No space left on device" into a DiskFullError that says
which folder filled up, how many bytes the write needed and how many were free."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from streaming.errors import DiskFullError

FULL = (errno.ENOSPC, errno.EDQUOT)


def free_bytes(folder: Path) -> int | None:
    """Bytes available to this user in `folder`'s filesystem (None if it cannot be asked)."""
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def disk_full(path: Path, needed: int, exc: OSError) -> DiskFullError:
    """The DiskFullError for writing `needed` bytes to `path`, caused by `exc`."""
    free = free_bytes(path.parent)
    room = f", {free} bytes free" if free is not None else ""
    reason = "quota exceeded" if exc.errno == errno.EDQUOT else "no space left"
    return DiskFullError(exc.errno, f"{path.parent}: {reason} writing {path.name} "
                                    f"({needed} bytes needed{room})")


@contextlib.contextmanager
def naming_full_disk(path: Path, needed: int) -> Iterator[None]:
    """Re-raise ENOSPC/EDQUOT inside the block as a DiskFullError about writing `path`."""
    try:
        yield
    except OSError as exc:
        if exc.errno in FULL and not isinstance(exc, DiskFullError):
            raise disk_full(Path(path), needed, exc) from exc
        raise
