"""A failure flag in shared memory: any process sets it with a reason, every waiter sees it.

Layout of the byte buffer: int64 state (0 clear, else the failed epoch + 2, 1 for no epoch),
int64 reason length, then the error class name and the reason (UTF-8, separated by 0x1f,
truncated to the buffer). The reason is written before the state, and setters serialise on a
file lock so the first reason wins intact.

A peer that sees the flag raises the root cause's class (when it is one of this library's
errors or a builtin one) with the failing process's message, so the error a user gets does not
depend on which process or thread noticed first; a flag from an earlier epoch is cleared when a
later epoch begins, so one failed epoch does not poison the next.
"""

from __future__ import annotations

import builtins
import contextlib

import numpy as np

import streaming.errors as errors_module
from streaming.coord.lock import FileLock
from streaming.errors import CoordinationError, DeadlineExceeded, StreamingError

_FIELDS = 16
_SEP = "\x1f"


class FailureFlag:
    """View of a shared byte buffer as a one-shot failure flag."""

    def __init__(self, buffer: np.ndarray, lock: FileLock | None = None) -> None:
        if buffer.dtype != np.uint8 or buffer.ndim != 1 or buffer.size <= _FIELDS:
            raise CoordinationError(f"failure flag needs a 1-d uint8 buffer > {_FIELDS} bytes")
        self._fields = buffer[:_FIELDS].view(np.int64)
        self._text = buffer[_FIELDS:]
        self._lock = lock

    def set(self, reason: str, *, kind: str = "", epoch: int = -1) -> bool:
        """Raise the flag with `reason` (and the error class name `kind`) during `epoch` (-1:
        unknown); False (and no change) if it was already set."""
        with self._locked():
            if self._fields[0]:
                return False
            text = f"{kind}{_SEP}{reason}" if kind else reason
            data = text.encode("utf-8", "replace")[: self._text.size]
            self._text[: len(data)] = np.frombuffer(data, np.uint8)
            self._fields[1] = len(data)
            self._fields[0] = max(int(epoch), -1) + 2
            return True

    def _text_parts(self) -> tuple[str, str] | None:
        if not self._fields[0]:
            return None
        n = int(self._fields[1])
        text = bytes(self._text[:n]).decode("utf-8", "replace")
        kind, sep, reason = text.partition(_SEP)
        if not sep:
            kind, reason = "", text
        return kind, reason or "(no reason given)"

    def reason(self) -> str | None:
        """The reason if the flag is set, else None."""
        parts = self._text_parts()
        return None if parts is None else parts[1]

    def kind(self) -> str | None:
        """The class name of the error that raised the flag ("" if not given), None if clear."""
        parts = self._text_parts()
        return None if parts is None else parts[0]

    def epoch(self) -> int | None:
        """The epoch the flag was raised in (-1 if unknown), None if clear."""
        state = int(self._fields[0])
        return None if not state else state - 2

    def clear_before(self, epoch: int) -> None:
        """Clear a flag raised during an epoch before `epoch`: that epoch is over."""
        with self._locked():
            failed = self.epoch()
            if failed is not None and 0 <= failed < epoch:
                self._fields[0] = 0

    def error(self, context: str = "") -> Exception | None:
        """The exception a peer raises for the set flag (None if clear): the root cause's class
        with the failing process's reason, or CoordinationError when the class is unknown."""
        parts = self._text_parts()
        if parts is None:
            return None
        kind, reason = parts
        where = f" ({context})" if context else ""
        return cause_error(kind, f"another process failed{where}: {reason}")

    def raise_if_set(self, context: str = "") -> None:
        """Raise the root cause's error (see `error`) when the flag is set."""
        error = self.error(context)
        if error is not None:
            raise error

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


def cause_error(kind: str, message: str) -> Exception:
    """An exception of class `kind` (one of this library's errors or a builtin exception) with
    `message`; CoordinationError(message) when `kind` names neither or will not take it."""
    cls = getattr(errors_module, kind, None) if kind else None
    if not (isinstance(cls, type) and issubclass(cls, StreamingError)):
        cls = getattr(builtins, kind, None) if kind else None
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            return CoordinationError(message)
    try:
        return cls(message)
    except Exception:
        return CoordinationError(message)
