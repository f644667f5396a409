"""A failure flag in shared memory: any process sets it with a reason, every waiter sees it.

Layout of the byte buffer: int64 state (0 clear, 1 set), int64 reason length, reason (UTF-8,
truncated to the buffer). The reason is written before the state, and setters serialise on a
file lock so the first reason wins intact.
"""

from __future__ import annotations

import contextlib

import numpy as np

from streaming.coord.lock import FileLock
from streaming.errors import CoordinationError, DeadlineExceeded

_FIELDS = 16


class FailureFlag:
    """View of a shared byte buffer as a one-shot failure flag."""

    def __init__(self, buffer: np.ndarray, lock: FileLock | None = None) -> None:
        if buffer.dtype != np.uint8 or buffer.ndim != 1 or buffer.size <= _FIELDS:
            raise CoordinationError(f"failure flag needs a 1-d uint8 buffer > {_FIELDS} bytes")
        self._fields = buffer[:_FIELDS].view(np.int64)
        self._text = buffer[_FIELDS:]
        self._lock = lock

    def set(self, reason: str) -> bool:
        """Raise the flag with `reason`; False (and no change) if it was already set."""
        with self._locked():
            if self._fields[0]:
                return False
            data = reason.encode("utf-8", "replace")[: self._text.size]
            self._text[: len(data)] = np.frombuffer(data, np.uint8)
            self._fields[1] = len(data)
            self._fields[0] = 1
            return True

    def reason(self) -> str | None:
        """The reason if the flag is set, else None."""
        if not self._fields[0]:
            return None
        n = int(self._fields[1])
        return bytes(self._text[:n]).decode("utf-8", "replace") or "(no reason given)"

    def raise_if_set(self, context: str = "") -> None:
        """Raise CoordinationError carrying the reason when the flag is set."""
        reason = self.reason()
        if reason is not None:
            where = f" ({context})" if context else ""
            raise CoordinationError(f"another process failed{where}: {reason}")

    @contextlib.contextmanager
    def _locked(self):
        if self._lock is None:
            yield
            return
        try:
            self._lock.acquire(timeout=2.0)
        except DeadlineExceeded:
            yield  # a stuck setter must not hide this failure: write anyway
            return
        try:
            yield
        finally:
            self._lock.release()
