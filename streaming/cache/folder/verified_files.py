"""Which files this node has already checked against an index digest, so `validate_hash` costs
one hash per file version per node (not one per process or per read).

Records live in a folder of this user's on the shared-memory file system: one small log per
(shard folder, algorithm), each line a file name and the file's identity when it matched
(device, inode, size, modification and change times in nanoseconds). Any write to the file, or
a new file under the same name, changes the identity, so an old line no longer matches. A log
is compacted to one line per name when it grows past a few lines per name, so the records
stay proportional to the shards in the cache, however often shards are evicted and fetched
again. Records vanish at reboot; a folder that is not this user's own (0700, owned by the uid)
is never trusted, and then nothing is remembered.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
from pathlib import Path

from streaming.util.fork_safe_lock import ForkSafeLock

COMPACT_FACTOR = 4  # a log is rewritten when it holds this many lines per distinct name

_lock = ForkSafeLock()
_logs: dict[Path, tuple[tuple[int, int], dict[str, str], int]] = {}  # log -> (stamp, names, lines)


def _records() -> Path | None:
    """This user's record folder (created 0700), or None when it cannot be trusted."""
    from streaming.coord.shm_files import shm_dir

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


def _log_of(path: Path, algo: str) -> tuple[Path, str] | None:
    """The log that records `path` under `algo`, and the name `path` has in it."""
    folder = _records()
    if folder is None:
        return None
    real = os.path.realpath(path)
    parent, name = os.path.split(real)
    key = hashlib.blake2b(f"{parent}|{algo}".encode(), digest_size=16).hexdigest()
    return folder / f"{key}.log", name


def _identity(info: os.stat_result) -> str:
    return (f"{info.st_dev} {info.st_ino} {info.st_size} {info.st_mtime_ns} "
            f"{info.st_ctime_ns}")


def _read(log: Path) -> tuple[dict[str, str], int]:
    """The last identity recorded per name in `log`, and its line count (cached per process,
    re-read when the log changed)."""
    try:
        info = os.stat(log)
    except OSError:
        return {}, 0
    stamp = (info.st_size, info.st_mtime_ns)
    with _lock:
        cached = _logs.get(log)
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2]
    names: dict[str, str] = {}
    lines = 0
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in log.read_text().split("\n"):
            name, sep, identity = line.partition("\t")
            if sep and identity:  # a line another process is still writing is skipped
                names[name] = identity
                lines += 1
    with _lock:
        _logs[log] = (stamp, names, lines)
    return names, lines


def is_verified(path: Path, info: os.stat_result, algo: str) -> bool:
    """Whether this node verified the file (as `info` describes it) with `algo` before."""
    where = _log_of(path, algo)
    if where is None:
        return False
    log, name = where
    names, _ = _read(log)
    return names.get(name) == _identity(info)


def mark_verified(path: Path, algo: str, info: os.stat_result | None = None) -> None:
    """Remember that the file at `path` (as `info`, taken before it was hashed, describes it;
    default: as it is now) matched its `algo` digest. Nothing is remembered when the file
    changed since `info`."""
    where = _log_of(path, algo)
    if where is None:
        return
    log, name = where
    with contextlib.suppress(OSError):
        now = _identity(os.stat(path))
        if info is not None and _identity(info) != now:
            return
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:  # one small O_APPEND write: lines of concurrent writers do not interleave
            os.write(fd, f"{name}\t{now}\n".encode())
        finally:
            os.close(fd)
        names, lines = _read(log)
        if lines > COMPACT_FACTOR * max(len(names), 8):
            _compact(log, names)


def _compact(log: Path, names: dict[str, str]) -> None:
    """Rewrite `log` with one line per name. A line appended meanwhile by another process may
    be lost, which only costs that file one more hash."""
    tmp = log.with_name(f".{log.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text("".join(f"{name}\t{identity}\n" for name, identity in names.items()))
        os.replace(tmp, log)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
