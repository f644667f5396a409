"""Where our shared segments live and the flock discipline every file there follows.

Segments are plain files on a RAM file system (/dev/shm on Linux) mapped with mmap, not
`multiprocessing.shared_memory`: on Python < 3.13 that module registers every attach with a
resource tracker that unlinks the segment when the *attaching* process exits, which breaks
unrelated processes sharing it. Plain files let us own the lifetime explicitly:

* every live file is held under an flock by its owner (segments: exclusive for their lifetime,
  or shared by every process mapping a held one; lock files: while held). The kernel drops the
  flock when the owner dies, however it dies.
* so a file of ours whose flock can be taken is stale, and whoever takes the flock may unlink it.
* whoever acquires an flock re-checks that the path still names the inode it locked, because a
  reclaimer may have unlinked it in between.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from streaming.errors import CoordinationError

PREFIX = "sds_"
ENV_DIR = "STREAMING_SHM_DIR"


def shm_dir() -> Path:
    """The directory for segments: $STREAMING_SHM_DIR, else /dev/shm, else a private temp dir."""
    override = os.environ.get(ENV_DIR)
    if override:
        path = Path(override)
    elif os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return Path("/dev/shm")
    else:
        path = Path(tempfile.gettempdir()) / f"streaming-shm-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CoordinationError(f"cannot create shared-memory directory {path}: {exc}") from exc
    return path


def try_flock(fd: int, *, shared: bool = False) -> bool:
    """Take an flock on `fd` without blocking; False when another open file holds it."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def file_id(st: os.stat_result) -> tuple[int, int]:
    """(device, inode): what tells one file from another whatever its name.

    Args:
        st: the file's stat.
    """
    return st.st_dev, st.st_ino


def names_file(path: Path, wanted: tuple[int, int]) -> bool:
    """Whether `path` names the file `wanted` (`file_id`): False once the name is removed, or
    given to another file.

    Args:
        path: the name.
        wanted: the file's (device, inode).
    """
    try:
        return file_id(os.stat(path)) == wanted
    except FileNotFoundError:
        return False


def names_inode(path: Path, fd: int) -> bool:
    """Whether `path` still names the file open as `fd` (a reclaimer may have replaced it)."""
    return names_file(path, file_id(os.fstat(fd)))


def reclaim_if_free(path: Path) -> bool:
    """Unlink `path` if nobody holds its flock (its owner died); True when it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, PermissionError, OSError):
        return False
    try:
        if not try_flock(fd) or not names_inode(path, fd):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops our flock


def our_files(directory: Path) -> Iterator[Path]:
    """Files in `directory` that carry our prefix and belong to the current user."""
    uid = os.getuid()
    with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.startswith(PREFIX):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if st.st_uid == uid and entry.is_file(follow_symlinks=False):
                yield Path(entry.path)
