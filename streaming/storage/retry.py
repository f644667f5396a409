"""Retry policy shared by downloads and uploads: per-attempt deadline, capped exponential
backoff with full jitter, fail-fast on errors that retrying cannot fix (403, 404), and patience
with a store that asks to slow down (429, 503, reset connections): those are retried until a
total deadline, honouring `Retry-After`, and slow the whole node down (storage/gate.py)."""

from __future__ import annotations

import email.utils
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
    ObjectTooLargeError,
    StorageError,
)
from streaming.storage.gate import NodeGate

# The defaults every download, upload and backend starts from (one place to change them).
RETRY = 2  # attempts after the first, for failures other than "slow down"
TIMEOUT = 60.0  # seconds per download attempt (and a backend's socket read timeout)
CONNECT_TIMEOUT = 10.0  # seconds to connect, at most
BACKOFF = 0.25  # seconds: the first backoff cap, doubled per attempt
MAX_BACKOFF = 10.0
DEADLINE = 120.0  # seconds: how long one transfer keeps retrying a store that says "slow down"
UPLOAD_TIMEOUT = 600.0  # seconds per attempt to upload one shard file
OVERLOAD_STATUSES = (429, 503)

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


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date); None when
    absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0) if when is not None else None


def status_error(message: str, status: int | None, retry_after: str | None = None
                 ) -> StorageError:
    """The StorageError for an HTTP error answer: whether asking again may help, whether the
    store asked to slow down (429, 503) and after how long (`Retry-After`)."""
    error = StorageError(message)
    error.retryable = status_retryable(status)
    error.overload = status in OVERLOAD_STATUSES
    error.retry_after = parse_retry_after(retry_after)
    return error


def _reset(exc: BaseException | None, depth: int = 0) -> bool:
    """Whether a connection reset is among the causes of `exc` (however an SDK wrapped it)."""
    if exc is None or depth > 8:
        return False
    if isinstance(exc, ConnectionResetError):
        return True
    inner = [a for a in getattr(exc, "args", ()) if isinstance(a, BaseException)]
    inner += [getattr(a, "reason", None) for a in inner]
    return any(_reset(e, depth + 1) for e in (exc.__cause__, exc.__context__, *inner))


def is_overload(exc: BaseException) -> bool:
    """Whether `exc` is the store asking us to slow down: a 429 or 503 answer, or a reset
    connection."""
    return is_retryable(exc) and (bool(getattr(exc, "overload", False)) or _reset(exc))


@dataclass(frozen=True)
class RetryPolicy:
    """Up to `attempts` tries of at most `timeout` seconds each for ordinary failures, with
    jittered backoff in between; "slow down" answers are retried (honouring `Retry-After`) until
    `deadline` seconds have passed since the first try, and slow down `gate`'s whole node.

    Args:
        attempts: tries for failures other than "slow down" (timeouts, 500, truncation).
        timeout: seconds per try.
        backoff: the first backoff cap in seconds, doubled per try up to `max_backoff`.
        max_backoff: the largest backoff cap.
        deadline: seconds after which "slow down" answers are no longer retried.
        gate: the node-wide slow-down of the store, if any.
    """

    attempts: int = RETRY + 1
    timeout: float = TIMEOUT
    backoff: float = BACKOFF
    max_backoff: float = MAX_BACKOFF
    deadline: float = DEADLINE
    gate: NodeGate | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ArgumentError(f"retry policy needs at least one attempt, got {self.attempts}")
        if not self.timeout > 0:
            raise ArgumentError(f"timeout must be positive, got {self.timeout}")
        if not self.deadline >= 0:
            raise ArgumentError(f"deadline must be >= 0, got {self.deadline}")

    def _cap(self, attempt: int) -> float:
        return min(self.max_backoff, self.backoff * 2 ** min(attempt, 64))

    def budget(self) -> float:
        """Upper bound of the wall time `run` can take (every attempt times out, max backoff,
        and "slow down" answers until the deadline)."""
        ordinary = self.attempts * self.timeout + sum(
            self._cap(i) for i in range(self.attempts - 1))
        return ordinary + self.deadline + self.timeout

    def run(self, what: str, action: Callable[[float], T]) -> T:
        """Call `action(deadline)` until it succeeds; give up with a typed error naming `what`."""
        start = time.monotonic()
        failures = tries = 0
        while True:
            tries += 1
            try:
                return self._try(what, action, start)
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                overload, last = is_overload(exc), exc
            failures += not overload
            wait = self._wait_after(last, tries, overload)
            log.info("%s: try %d failed (%s); next in %.2f s", what, tries, last, wait)
            late = time.monotonic() + wait - start > self.deadline
            if failures >= self.attempts or (overload and late):
                break
            _sleep(wait)
        cls = DownloadTimeoutError if isinstance(last, DownloadTimeoutError) or overload \
            else ObjectTooLargeError if isinstance(last, ObjectTooLargeError) else StorageError
        raise cls(f"{what}: failed after {tries} attempt(s); last error: {last} (gave up after "
                  f"{time.monotonic() - start:.1f} s)") from last

    def _try(self, what: str, action: Callable[[float], T], start: float) -> T:
        if self.gate is None:
            return action(time.monotonic() + self.timeout)
        with self.gate.permit(start + self.budget(), what):
            result = action(time.monotonic() + self.timeout)
        self.gate.succeeded()
        return result

    def _wait_after(self, exc: BaseException, tries: int, overload: bool) -> float:
        """Seconds to wait before the next try: jittered backoff, at least the store's
        `Retry-After`, at least the node's pause after a refusal."""
        wait = random.uniform(0.0, self._cap(tries - 1))
        if not overload:
            return wait
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.deadline))
        if self.gate is not None:
            wait = max(wait, self.gate.refused(retry_after))
        return wait
