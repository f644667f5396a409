"""Checks that a stream's `remote` and `local` can work before anything is written: a URL with a
missing slash, a `local` that is a file or cannot be written, and clean-up of the folders a
failed start created."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path

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
    from streaming.cache.marker import CACHE_MARKER
    from streaming.cache.origin import ORIGIN_FILE, ORIGIN_LOCK

    ours = {CACHE_MARKER, ORIGIN_FILE, ORIGIN_LOCK}
    for path in created:
        try:
            names = os.listdir(path)
        except OSError:
            continue
        if any(name not in ours for name in names):
            return
        for name in names:
            with contextlib.suppress(OSError):
                os.unlink(path / name)
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.ENOENT):
                raise
