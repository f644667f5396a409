"""The lock files this library makes in cache folders (`.streaming-origin.lock`,
`.<shard>.prep.lock`): created like every other file, 0666 minus the umask, so in a folder a
team shares (group-writable, umask 002) a colleague's job waits for a held lock instead of
failing to open it."""

from __future__ import annotations

import os

from streaming.coord.lock import LIKE_ANY_FILE, FileLock


def folder_lock(path: str | os.PathLike[str], *, timeout: float = 60.0) -> FileLock:
    """A lock file in a cache or dataset folder.

    Args:
        path: the lock file, created when missing.
        timeout: seconds `acquire` waits by default.
    """
    return FileLock(path, timeout=timeout, mode=LIKE_ANY_FILE)
