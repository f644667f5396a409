"""Bounded waiting: every wait has a deadline, watches the shared failure flag and its peer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from streaming.errors import ArgumentError, CoordinationError, DeadlineExceeded

T = TypeVar("T")


class Flag(Protocol):
    """Anything that reports a failure another process raised: its reason, and the error to
    raise for it."""

    def reason(self) -> str | None: ...

    def error(self, context: str = "") -> Exception | None: ...


class Deadline:
    """A point in monotonic time `seconds` from now."""

    def __init__(self, seconds: float) -> None:
        if seconds < 0:
            raise ArgumentError(f"timeout must be >= 0 seconds, got {seconds}")
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (0 when passed)."""
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.end


def wait_for(
    predicate: Callable[[], T | None],
    *,
    what: str,
    timeout: float,
    poll: float = 0.02,
    flag: Flag | None = None,
    alive: Callable[[], str | None] | None = None,
) -> T:
    """Poll `predicate` until it returns something other than None/False, and return that.

    Raises `flag`'s error (the failing process's cause, see coord.flag) as soon as it is set,
    CoordinationError when `alive()` returns a message (a peer died), and DeadlineExceeded
    naming `what` after `timeout` seconds. Polling starts at 1 ms and backs off to `poll`.
    """
    deadline = Deadline(timeout)
    sleep = 0.001
    while True:
        if flag is not None and (error := flag.error(f"stopped waiting for {what}")) is not None:
            raise error
        value = predicate()
        if value is not None and value is not False:
            return value
        if alive is not None and (death := alive()) is not None:
            raise CoordinationError(f"stopped waiting for {what}: {death}")
        if deadline.expired():
            raise DeadlineExceeded(f"waited {timeout:g} s for {what}")
        time.sleep(min(sleep, deadline.remaining()))
        sleep = min(sleep * 2, poll)
