"""Parallel byte-range download of one large object into one preallocated file."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from streaming.errors import ArgumentError
from streaming.storage.backend import Backend, Verifier, check_size
from streaming.storage.retry import RetryPolicy
from streaming.util.atomic import staged_file
from streaming.util.pagewrite import pwrite_sliced


def spans(size: int, part_size: int, first: int = 0) -> list[tuple[int, int]]:
    """[start, end) byte ranges of at most `part_size` covering [first, size)."""
    if part_size < 1:
        raise ArgumentError(f"part_size must be positive, got {part_size}")
    return [(start, min(start + part_size, size)) for start in range(first, size, part_size)]


def _preallocate(fd: int, size: int) -> None:
    """Reserve the space now so a full disk fails before any byte is fetched."""
    if size and hasattr(os, "posix_fallocate"):
        with contextlib.suppress(OSError):  # filesystems without fallocate still get ftruncate
            os.posix_fallocate(fd, 0, size)
            return
    os.ftruncate(fd, size)


def read_part(backend: Backend, path: str, size: int, start: int, end: int,
              policy: RetryPolicy) -> bytes:
    """Bytes [start, end) of an object of `size` bytes, retried on their own; the last part
    reads to the object's end, so an object bigger than `size` is caught too."""
    url = backend.url(path)

    def attempt(deadline: float) -> bytes:
        if end < size:
            return backend.get_range(path, start, end, deadline=deadline)
        data = bytearray()
        for piece in backend.chunks(path, start, None, deadline=deadline):
            data += piece
            if start + len(data) > size:  # a longer body: stop at its first excess read
                break
        check_size(url, start + len(data), size)
        return bytes(data)

    return policy.run(f"{url} bytes {start}-{end - 1}", attempt)


def ranged_download(
    backend: Backend, path: str, dest: Path, size: int, *, policy: RetryPolicy,
    part_size: int, max_parts: int, verify: Verifier | None = None,
) -> Path:
    """Fetch `size` bytes as parallel ranges (each retried on its own), verify, rename to dest."""
    parts = spans(size, part_size)

    with staged_file(dest) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _preallocate(fd, size)

            def fetch_part(start: int, end: int) -> None:
                pwrite_sliced(fd, read_part(backend, path, size, start, end, policy), start)

            pool = ThreadPoolExecutor(max(1, min(max_parts, len(parts))), "range-part")
            try:
                futures = [pool.submit(fetch_part, start, end) for start, end in parts]
                done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # re-raise the first part that gave up
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            os.close(fd)
        if verify is not None:
            verify(tmp)
    return Path(dest)
