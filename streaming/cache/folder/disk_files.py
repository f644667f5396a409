"""The few file-system facts the cache engine needs: sizes, removal, folder totals, and the
temporary files a dead or failed preparation leaves beside a shard."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Collection, Iterable
from pathlib import Path

from streaming.util.confine import remove

STALE_TEMP = 120.0  # seconds after which `remove_leftovers(stale_only=True)` removes a file


def size(path: Path | None) -> int:
    """Bytes of `path`, 0 when it is missing (or None)."""
    try:
        return path.stat().st_size if path is not None else 0
    except FileNotFoundError:
        return 0


def identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of `path`, None when it is missing: tells a file from the
    one that replaced it."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def folder_bytes(dirs: Iterable[str]) -> int:
    """Total size of every file below `dirs` (what `du --apparent-size` would count)."""
    total = 0
    for top in dirs:
        for root, _, files in os.walk(top):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(root, name)).st_size
    return total


def remove_leftovers(root: Path, paths: Iterable[Path], *, stale_only: bool) -> None:
    """Delete the hidden temp and lock files of `paths` (`.<name>.*.tmp`, `.<name>.*lock`)
    in cache folder `root`; with `stale_only`, only those untouched for STALE_TEMP seconds."""
    now = time.time()
    for path in paths:
        if not path.parent.is_dir():
            continue
        owner = {path.name}
        for entry in os.scandir(path.parent):
            if leftover_of(entry.name, owner) is None:
                continue
            with contextlib.suppress(FileNotFoundError):
                if stale_only and now - entry.stat().st_mtime < STALE_TEMP:
                    continue
                remove(root, entry.path)


def temp_bytes(*paths: Path | None) -> int:
    """Bytes of the temp files beside `paths` (`.<name>.*.tmp`): what preparations in flight
    have written so far."""
    total = 0
    for path in filter(None, paths):
        prefix = f".{path.name}."
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(path.parent):
                if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                    with contextlib.suppress(FileNotFoundError):
                        total += entry.stat(follow_symlinks=False).st_size
    return total


def listing(folder: str | os.PathLike) -> dict[str, tuple[int, float]]:
    """Size and mtime of each file directly in `folder` (empty when it is missing): one scan
    serves every shard of a folder, where a scan per shard grows with shards x files."""
    out: dict[str, tuple[int, float]] = {}
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return out
    for entry in entries:
        with contextlib.suppress(FileNotFoundError):
            if entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                out[entry.name] = (info.st_size, info.st_mtime)
    return out


def leftover_of(name: str, owners: Collection[str]) -> str | None:
    """The file among `owners` whose temp or lock file `name` is (`.<owner>.*.tmp`,
    `.<owner>.*lock`), or None."""
    if not (name.startswith(".") and name.endswith((".tmp", ".lock"))):
        return None
    parts = name[1:].split(".")
    for k in range(len(parts) - 1, 0, -1):  # the longest owner first: names contain dots
        owner = ".".join(parts[:k])
        if owner in owners:
            return owner
    return None


def sweep_orphans(root: Path, folder: Path, files: dict[str, tuple[int, float]],
                  shards: dict[str, str | None]) -> list[str]:
    """Remove the temp and lock files of shards (raw name -> compressed name) in `folder` (in
    cache folder `root`) that no live process is preparing, however fresh they are; returns
    the names removed.

    Every preparation holds the shard's `.<raw>.prep.lock` flock while it writes, and the kernel
    drops a flock when its holder dies: taking that lock proves its files are orphans."""
    from streaming.cache.folder.shared_locks import folder_lock

    owner_of = {zipped: raw for raw, zipped in shards.items() if zipped}
    owner_of.update({raw: raw for raw in shards})
    groups: dict[str, list[str]] = {}
    for name in files:
        owner = leftover_of(name, owner_of.keys())
        if owner is not None:
            groups.setdefault(owner_of[owner], []).append(name)
    removed: list[str] = []
    for raw, names in groups.items():
        prep = f".{raw}.prep.lock"
        lock = folder_lock(folder / prep)
        if not lock.try_acquire():
            continue  # a live preparer: its files are its own
        try:
            for name in names:
                if name != prep:
                    remove(root, folder / name)
        finally:
            lock.release()  # removes the lock file too
        removed += names
    return removed


def free_bytes(folder: Path) -> int:
    """Bytes this user may still write on the file system holding `folder` (or its nearest
    existing parent)."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    info = os.statvfs(probe)
    return info.f_bavail * info.f_frsize


def disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, is ENOSPC or EDQUOT (a full disk or
    quota)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        cause = cause.__cause__ or cause.__context__
    return False
