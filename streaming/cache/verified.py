"""Which files this node has already checked against an index digest, so `validate_hash` costs
one hash per file version per node (not one per process or per read).

A record is a small file in a folder of this user's on the shared-memory file system, named by
a digest of the file's real path and the algorithm, holding the file's identity when it matched:
device, inode, size, and modification and change times in nanoseconds. Any write to the file,
or a new file under the same name, changes the identity, so the record no longer matches (and
there is one record per path, however often a shard is evicted and fetched again). Records
vanish at reboot; a folder that is not this user's own (0700, owned by the uid) is never
trusted, and then nothing is remembered.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path


def _records() -> Path | None:
    """This user's record folder (created 0700), or None when it cannot be trusted."""
    from streaming.coord.files import shm_dir

    folder = shm_dir() / f"mds-verified-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & 0o077):
        return None
    return folder


def _name(path: Path, algo: str) -> str:
    return hashlib.blake2b(f"{os.path.realpath(path)}|{algo}".encode(),
                           digest_size=16).hexdigest()


def _identity(info: os.stat_result) -> str:
    return (f"{info.st_dev} {info.st_ino} {info.st_size} {info.st_mtime_ns} "
            f"{info.st_ctime_ns}")


def is_verified(path: Path, info: os.stat_result, algo: str) -> bool:
    """Whether this node verified the file (as `info` describes it) with `algo` before."""
    folder = _records()
    if folder is None:
        return False
    try:
        return (folder / _name(path, algo)).read_text() == _identity(info)
    except OSError:
        return False


def mark_verified(path: Path, algo: str, info: os.stat_result | None = None) -> None:
    """Remember that the file at `path` (as `info`, taken before it was hashed, describes it;
    default: as it is now) matched its `algo` digest. Nothing is remembered when the file
    changed since `info`."""
    folder = _records()
    if folder is None:
        return
    with contextlib.suppress(OSError):
        now = _identity(os.stat(path))
        if info is not None and _identity(info) != now:
            return
        record = folder / _name(path, algo)
        tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        tmp.write_text(now)
        os.replace(tmp, record)
