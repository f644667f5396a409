"""Robust transfers on top of the backends: deadlines, retries, size/hash checks, parallel
ranges for big objects, and node-wide single-flight downloads."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from streaming.errors import ArgumentError, HashMismatchError
from streaming.storage.backend import Backend, Verifier
from streaming.storage.gate import gate_for
from streaming.storage.ranged import ranged_download
from streaming.storage.retry import (
    BACKOFF,
    CONNECT_TIMEOUT,
    DEADLINE,
    RETRY,
    TIMEOUT,
    RetryPolicy,
)
from streaming.storage.schemes import backend_for
from streaming.storage.singleflight import single_flight

MiB = 1 << 20


def _hash_verifier(url: str, dest: Path, expected: Mapping[str, str]) -> Verifier:
    def verify(tmp: Path) -> None:
        from streaming.format.hashing import file_hexdigests

        digests = file_hexdigests(tuple(expected), tmp)
        for algo, want in expected.items():
            got = digests[algo]
            if got != want:
                raise HashMismatchError(
                    f"{dest.name} (from {url}): {algo} digest is {got}, the index says {want}"
                )

    return verify


def transfer_policy(timeout: float, retry: int, backoff: float, url: str | None = None,
                    deadline: float = DEADLINE) -> RetryPolicy:
    """`retry` more attempts after an ordinary failure, each of at most `timeout` seconds; "slow
    down" answers of the store holding `url` are retried until the deadline and slow down the
    node (see RetryPolicy)."""
    if retry < 0:
        raise ArgumentError(f"retry must be >= 0, got {retry}")
    return RetryPolicy(attempts=retry + 1, timeout=timeout, backoff=backoff, deadline=deadline,
                       gate=None if url is None else gate_for(url))


def timed_backend(url: str, timeout: float) -> tuple[Backend, str]:
    """`backend_for(url)` with its socket read timeout at `timeout` (connect: at most 10 s)."""
    return backend_for(url, read_timeout=timeout, connect_timeout=min(timeout, CONNECT_TIMEOUT))


def fetch(
    url: str, dest: str | os.PathLike, *, expected_size: int | None = None,
    expected_hashes: Mapping[str, str] | None = None, timeout: float = TIMEOUT, retry: int = RETRY,
    range_threshold: int = 16 * MiB, part_size: int = 8 * MiB, max_parts: int = 8,
    backoff: float = BACKOFF, deadline: float = DEADLINE, max_size: int | None = None,
) -> Path:
    """Download `url` to `dest` (appears only complete and verified); return dest.

    Each attempt is bounded by `timeout` seconds; transient failures are retried `retry` more
    times, and "slow down" answers (429, 503, resets) until `deadline` seconds have passed.
    Objects of at least `range_threshold` bytes come down as parallel ranges. A body longer
    than `expected_size` (without one: `max_size`) is refused as its excess arrives."""
    dest = Path(dest)
    policy = transfer_policy(timeout, retry, backoff, url, deadline)
    backend, path = timed_backend(url, timeout)
    verify = _hash_verifier(url, dest, expected_hashes) if expected_hashes else None
    size = expected_size
    if backend.parallel_ranges and max_parts > 1:
        if size is None:
            size = policy.run(url, lambda deadline: backend.size(path))
        if size >= range_threshold:
            return ranged_download(
                backend, path, dest, size, policy=policy, part_size=part_size,
                max_parts=max_parts, verify=verify,
            )
    return policy.run(
        url,
        lambda deadline: backend.download(
            path, dest, expected_size=size, deadline=deadline, hashes=expected_hashes,
            max_size=max_size,
        ),
    )


def _complete(dest: Path, expected_size: int | None) -> bool:
    try:
        size = dest.stat().st_size
    except FileNotFoundError:
        return False
    return expected_size is None or size == expected_size


def fetch_once(
    url: str, dest: str | os.PathLike, *, expected_size: int | None = None,
    wait_timeout: float | None = None, **options,
) -> Path:
    """`fetch`, but one process per node downloads `dest`; concurrent callers wait for it and
    return the finished file (an existing complete `dest` is returned without any request)."""
    dest = Path(dest)
    if _complete(dest, expected_size):
        return dest
    if wait_timeout is None:
        policy = transfer_policy(
            options.get("timeout", TIMEOUT), options.get("retry", RETRY),
            options.get("backoff", BACKOFF), deadline=options.get("deadline", DEADLINE))
        wait_timeout = policy.budget() + 5.0
    with single_flight(dest, deadline=time.monotonic() + wait_timeout):
        if _complete(dest, expected_size):
            return dest
        return fetch(url, dest, expected_size=expected_size, **options)


def upload(
    local: str | os.PathLike, url: str, *, retry: int = RETRY, timeout: float = TIMEOUT,
    backoff: float = BACKOFF, deadline: float = DEADLINE,
) -> None:
    """Copy a local file to `url` with the download retry policy (multipart when large)."""
    policy = transfer_policy(timeout, retry, backoff, url, deadline)
    backend, path = timed_backend(url, timeout)
    policy.run(f"upload {local} -> {url}", lambda deadline: backend.upload(Path(local), path))
