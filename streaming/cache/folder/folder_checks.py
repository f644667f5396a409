"""Checks that a stream's `remote` and `local` can work before anything is written: a URL with a
missing slash, a `local` that is a file or cannot be written, and clean-up of the folders a
failed start created."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path

from streaming.cache.folder.file_names import BOOKKEEPING_FILES
from streaming.errors import CacheFolderError, LocationError

# "s3:/bucket" or "gs:bucket": a scheme (two letters or more, so no drive letter) without "//".
_BROKEN_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(?!//)")
_SCHEMES = ("s3", "gs", "gcs", "az", "azure", "abfs", "abfss", "file", "http", "https", "oci",
            "hf", "dbfs", "wasb", "wasbs", "r2")


def check_location(value: str, what: str) -> None:
    """Raise LocationError for `value` (a `remote` or `local`) that names a storage scheme but
    not as a URL (`s3:/bucket`, `s3:bucket`): taken as a path it would create that folder."""
    match = _BROKEN_URL.match(value)
    if match and match.group(1).lower() in _SCHEMES:
        scheme = match.group(1)
        rest = value[len(scheme) + 1:].lstrip("/")
        raise LocationError(
            f"{what}={value!r} is not a valid URL (did you mean {scheme}://{rest}?); a path "
            f"starting with {scheme}: is refused so that no such folder is created")


def make_folder(folder: Path) -> list[Path]:
    """Create `folder` (and missing parents) for cached files and check it can be written;
    returns the folders created, deepest first (see `remove_created`). CacheFolderError names
    the folder when a file stands in the way or it is not writable."""
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail with a bare FileExistsError
            raise CacheFolderError(f"local folder {folder}: {probe} is a broken symbolic link")
        missing.append(probe)
        probe = probe.parent
    if not probe.is_dir():
        raise CacheFolderError(
            f"local folder {folder}: {probe} is a file, not a folder; point `local` at a folder "
            "(it is created when missing)")
    try:
        for path in reversed(missing):
            path.mkdir(exist_ok=True)
    except OSError as exc:
        remove_created(missing)
        raise CacheFolderError(
            f"cannot create the local folder {folder}: {exc.strerror or exc} (in {probe}); "
            "choose a `local` you can write to") from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CacheFolderError(
            f"local folder {folder} is not writable by this user (uid {os.getuid()}); shards "
            "from the remote are stored there: choose a `local` you can write to")
    return missing


def remove_created(created: list[Path]) -> None:
    """Remove the folders `make_folder` created (deepest first) if nothing was left in them but
    this library's own bookkeeping files."""
    for path in created:
        try:
            names = os.listdir(path)
        except OSError:
            continue
        if any(name not in BOOKKEEPING_FILES for name in names):
            return
        for name in names:
            with contextlib.suppress(OSError):
                os.unlink(path / name)
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.ENOENT):
                raise


def user_cache_root(temp: Path | None = None) -> Path:
    """This user's folder for default caches, `<temp dir>/mds-streaming-<uid>` (TMPDIR is
    honoured: the temp dir is usually on the node's local disk; `temp` overrides it), created
    0700. CacheFolderError
    when it exists but is not a folder of this user's that only this user can write: anyone who
    could write there could plant shards this user would read."""
    import stat
    import tempfile

    root = Path(temp or tempfile.gettempdir()) / f"mds-streaming-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700, parents=True)
    info = os.lstat(root)
    ours = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    if ours and info.st_mode & 0o070 and not info.st_mode & 0o002:
        os.chmod(root, 0o700)  # LocalDataset and the lengths cache make it with the umask
    elif not ours or info.st_mode & 0o002:
        raise CacheFolderError(
            f"the default cache folder {root} is not this user's own (a folder owned by uid "
            f"{os.getuid()} that only it can write): another user could have planted shards "
            "there. Remove it, or pass `local` (a folder of yours)")
    return root


def warn_if_shared(folder: Path, hashed: bool) -> bool:
    """Warn (once per call) when cache `folder` belongs to another user or anyone may write to
    it and no `validate_hash` checks what is read from it; True when it warned."""
    import logging

    try:
        info = os.stat(folder)
    except OSError:  # not there yet (make_folder reports what stands in its way)
        return False
    foreign = info.st_uid != os.getuid()
    if hashed or not (foreign or info.st_mode & 0o002):
        return False
    who = f"owned by uid {info.st_uid}" if foreign else "writable by every user"
    logging.getLogger("streaming.cache").warning(
        "cache folder %s is %s: shards there could be changed by someone else and are read "
        "without a check; pass validate_hash (e.g. 'xxh64', if the index records it) to verify "
        "every shard before use", folder, who)
    return True
