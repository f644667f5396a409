"""Publish a file atomically: write a temp file beside it, fsync, then rename over the target.

`durable=False` skips both fsyncs, for files that can be rebuilt (decompressed cache shards):
readers still never see a partial file, but a power cut may lose the newest ones, which the
size check on the next start then rebuilds. fsync makes writing a large file markedly slower."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from streaming.util.pagewrite import write_sliced


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, durable: bool = True) -> Iterator[BinaryIO]:
    """Yield a file whose content replaces `path` only if the block completes without error."""
    path = Path(path)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` so readers see the old file or the whole new one, never a part."""
    with atomic_output(path) as handle:
        write_sliced(handle, data)
    return Path(path)


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new hidden sibling of `path`, created with mode 0666 so the umask alone decides who may
    read the published file (mkstemp's 0600 would survive the rename and lock colleagues out)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
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
