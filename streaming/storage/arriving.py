"""A byte range of an object, filled by one thread and taken in order by another while its
pieces arrive; the taker may shorten it (`cut`) to hand the rest to other ranges."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator

from streaming.storage.backend import Backend, check_size
from streaming.storage.retry import RetryPolicy


class ArrivingRange:
    """Bytes [start, end) of an object of `size` bytes. `fill` fetches them on a pool thread
    (each retry from the first byte not yet received); `take` yields them in order on the
    consumer's thread as they arrive.

    Args:
        backend: The store holding the object.
        path: The object's path in `backend`.
        size: The object's size, as the index gives it.
        start: The range's first byte.
        end: One past the range's last byte. A range that ends at `size` reads to the object's
            end, so an object bigger than `size` is caught.
    """

    def __init__(self, backend: Backend, path: str, size: int, start: int, end: int) -> None:
        self.backend, self.path, self.size = backend, path, size
        self.start, self.end = start, end
        self.received = 0  # bytes fetched so far (taken or waiting in `_pieces`)
        self.waited = 0.0  # seconds `take` blocked for a piece after the first one arrived
        self._pieces: deque[bytes] = deque()
        self._done = False
        self._error: BaseException | None = None
        self._stopped = False
        self._changed = threading.Condition()

    def fill(self, policy: RetryPolicy) -> None:
        """Fetch the range under `policy`; a failure that outlasts it reaches the taker."""
        url = self.backend.url(self.path)
        try:
            policy.run(f"{url} bytes {self.start}-{self.end - 1}", self._attempt)
        except BaseException as exc:  # raised again on the consumer's thread, by `take`
            self._error = exc
        finally:
            with self._changed:
                self._done = True
                self._changed.notify()

    def _attempt(self, deadline: float) -> None:
        url = self.backend.url(self.path)
        with self._changed:
            first, open_ended = self.start + self.received, self.end >= self.size
            if first >= self.end and not open_ended:
                return
        pieces = self.backend.chunks(self.path, first or None, None if open_ended else self.end,
                                     deadline=deadline)
        for piece in pieces:
            if self._stopped:
                return
            with self._changed:
                if self.end < self.size:  # never past the end, which `cut` may have moved
                    piece = piece[:max(self.end - self.start - self.received, 0)]
                self.received += len(piece)
                if piece:
                    self._pieces.append(piece)
                    self._changed.notify()
                if self.end < self.size and self.start + self.received >= self.end:
                    return
            if self.start + self.received > self.size:
                check_size(url, self.start + self.received, self.size)
        if self.end >= self.size:
            check_size(url, self.start + self.received, self.size)
        else:  # truncated: the next attempt asks for the rest
            check_size(url, self.received, self.end - self.start)

    def take(self) -> Iterator[bytes]:
        """The range's pieces in order as they arrive; raises what made `fill` give up."""
        while True:
            with self._changed:
                if not self._pieces and not self._done:
                    began, flowing = time.perf_counter(), self.received > 0
                    while not self._pieces and not self._done:
                        self._changed.wait()
                    if flowing:  # not the wait for the first byte
                        self.waited += time.perf_counter() - began
                if self._pieces:
                    piece = self._pieces.popleft()
                elif self._error is not None:
                    raise self._error
                else:
                    return
            yield piece

    def cut(self, lead: int) -> int:
        """End the range `lead` bytes past what has arrived, if that is before its end; the
        new end (the old one when it is nearer)."""
        with self._changed:
            self.end = min(self.end, self.start + self.received + lead)
            return self.end

    def stop(self) -> None:
        """Make `fill` end at its next piece (the consumer has given up)."""
        self._stopped = True
