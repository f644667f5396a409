"""Retry policy shared by downloads and uploads: per-attempt deadline, capped exponential
backoff with full jitter, and fail-fast on errors that retrying cannot fix (403, 404)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from streaming.errors import (
    AccessDeniedError,
    ArgumentError,
    DownloadTimeoutError,
    ObjectNotFoundError,
    StorageError,
)

# The defaults every download, upload and backend starts from (one place to change them).
RETRY = 2  # attempts after the first
TIMEOUT = 60.0  # seconds per download attempt (and a backend's socket read timeout)
CONNECT_TIMEOUT = 10.0  # seconds to connect, at most
BACKOFF = 0.25  # seconds: the first backoff cap, doubled per attempt
MAX_BACKOFF = 10.0
UPLOAD_TIMEOUT = 600.0  # seconds per attempt to upload one shard file

T = TypeVar("T")
log = logging.getLogger(__name__)
_sleep = time.sleep  # indirection so tests can observe backoff without waiting


def is_retryable(exc: BaseException) -> bool:
    """Transport failures (5xx, resets, timeouts, truncation) are; missing / forbidden are not.

    A backend can mark any other permanent failure with `exc.retryable = False`."""
    return (
        isinstance(exc, StorageError)
        and not isinstance(exc, (ObjectNotFoundError, AccessDeniedError))
        and getattr(exc, "retryable", True)
    )


def status_retryable(status: int | None) -> bool:
    """Whether a failure with HTTP status `status` may heal by asking again: server errors,
    timeouts (408) and throttling (429) may; other client errors (bad range, bad request) not."""
    return not (isinstance(status, int) and 400 <= status < 500) or status in (408, 429)


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries of at most `timeout` seconds each, with jittered backoff in between."""

    attempts: int = RETRY + 1
    timeout: float = TIMEOUT
    backoff: float = BACKOFF
    max_backoff: float = MAX_BACKOFF

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ArgumentError(f"retry policy needs at least one attempt, got {self.attempts}")
        if not self.timeout > 0:
            raise ArgumentError(f"timeout must be positive, got {self.timeout}")

    def _cap(self, attempt: int) -> float:
        return min(self.max_backoff, self.backoff * 2**attempt)

    def budget(self) -> float:
        """Upper bound of the wall time `run` can take (every attempt times out, max backoff)."""
        return self.attempts * self.timeout + sum(self._cap(i) for i in range(self.attempts - 1))

    def run(self, what: str, action: Callable[[float], T]) -> T:
        """Call `action(deadline)` until it succeeds; give up with a typed error naming `what`."""
        last: BaseException | None = None
        for attempt in range(self.attempts):
            if attempt:
                _sleep(random.uniform(0.0, self._cap(attempt - 1)))
            try:
                return action(time.monotonic() + self.timeout)
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                last = exc
                log.info("%s: attempt %d/%d failed: %s", what, attempt + 1, self.attempts, exc)
        cls = DownloadTimeoutError if isinstance(last, DownloadTimeoutError) else StorageError
        raise cls(f"{what}: failed after {self.attempts} attempt(s); last error: {last}") from last
