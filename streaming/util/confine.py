"""The one guard every create, rename and removal under a cache or dataset folder passes: the
path must resolve (symbolic links followed, whatever part of it they stand in) to a place
strictly inside the folder. Names come from indexes that remote parties write; a name that
passed `format.index_entries.check_basename` is relative and never climbs, so only links can
still lead out, and those are caught here."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from streaming.errors import UnsafePathError


def confine(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path` itself, once it is known to resolve strictly inside folder `root`.

    Args:
        root: the cache or dataset folder the path must stay in.
        path: the file about to be created, renamed or removed.

    Raises:
        UnsafePathError: naming the path, where it resolves and the folder.
    """
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UnsafePathError(
            f"{os.fspath(path)} resolves to {real}, outside the folder {os.fspath(root)} "
            f"({real_root}): refused (a name from an index, or a symbolic link in the folder, "
            "leads out of it; nothing there is created, replaced or removed)")
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
