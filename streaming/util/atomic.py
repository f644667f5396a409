"""Publish a file atomically: write a hidden temp file beside it, then rename it over the target,
so readers see the old file or the whole new one, never a part.

`atomic_output` hands out an open file and fsyncs it (and the folder) before and after the
rename; `durable=False` skips both fsyncs, for files that can be rebuilt (decompressed cache
shards): readers still never see a partial file, but a power cut may lose the newest ones, which
the size check on the next start then rebuilds. fsync makes writing a large file markedly slower.
`staged_file` hands out the temp path instead, for writers that open the file themselves
(downloads, copies)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from streaming.util.pagewrite import write_sliced


def temp_path_for(dest: Path) -> Path:
    """A unique hidden temp name in dest's folder (same filesystem, so os.replace is atomic)."""
    return dest.parent / f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, durable: bool = True) -> Iterator[BinaryIO]:
    """Yield a file whose content replaces `path` only if the block completes without error."""
    path = Path(path)
    fd, tmp = _create_temp(path)
    with _published(tmp, path), os.fdopen(fd, "wb") as handle:
        yield handle
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    if durable:
        _fsync_dir(path.parent)


@contextlib.contextmanager
def staged_file(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path beside `dest` (its folder created); on success rename it onto `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_for(dest)
    with _published(tmp, dest):
        yield tmp


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` so readers see the old file or the whole new one, never a part."""
    with atomic_output(path) as handle:
        write_sliced(handle, data)
    return Path(path)


@contextlib.contextmanager
def _published(tmp: Path, dest: Path) -> Iterator[None]:
    """Rename `tmp` onto `dest` when the block completes; remove `tmp` when it raises."""
    try:
        yield
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new hidden sibling of `path`, created with mode 0666 so the umask alone decides who may
    read the published file (mkstemp's 0600 would survive the rename and lock colleagues out)."""
    for _ in range(100):
        tmp = temp_path_for(path)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _fsync_dir(folder: Path) -> None:
    # Makes the rename durable; some filesystems refuse to open directories, which is harmless.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
