"""Write-then-rename helpers, so a file at its final path is always complete."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def temp_path_for(dest: Path) -> Path:
    """A unique hidden temp name in dest's folder (same filesystem, so os.replace is atomic)."""
    return dest.parent / f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


@contextlib.contextmanager
def staged_file(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path; on success rename it onto `dest`, on error remove it."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_for(dest)
    try:
        yield tmp
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
