"""A byte range of an object, filled by one thread and taken in order by another while its
pieces arrive."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator

from streaming.errors import DownloadTimeoutError
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
        patience: Seconds from now after which `take` stops waiting for `fill` (which its
            retry policy ends sooner: this is the bound of last resort).
    """

    def __init__(self, backend: Backend, path: str, size: int, start: int, end: int,
                 patience: float) -> None:
        self.backend, self.path, self.size = backend, path, size
        self.start, self.end = start, end
        self.patience = patience
        self._give_up = time.monotonic() + patience
        self.received = 0  # bytes fetched so far (taken or waiting in `_pieces`)
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
        url, last = self.backend.url(self.path), self.end >= self.size
        if self.received == self.end - self.start and not last:
            return
        first = self.start + self.received
        for piece in self.backend.chunks(self.path, first or None, None if last else self.end,
                                         deadline=deadline):
            if self._stopped:
                return
            with self._changed:
                self.received += len(piece)
                self._pieces.append(piece)
                self._changed.notify()
            if self.start + self.received > self.size:
                check_size(url, self.start + self.received, self.size)
        if last:
            check_size(url, self.start + self.received, self.size)
        else:  # truncated: the next attempt asks for the rest
            check_size(url, self.received, self.end - self.start)

    def take(self) -> Iterator[bytes]:
        """The range's pieces in order as they arrive; raises what made `fill` give up."""
        while True:
            with self._changed:
                while not self._pieces and not self._done:
                    left = self._give_up - time.monotonic()
                    if left <= 0:
                        raise DownloadTimeoutError(
                            f"{self.backend.url(self.path)} bytes {self.start}-{self.end - 1}: "
                            f"nothing arrived for {self.patience:g} s")
                    self._changed.wait(left)
                if self._pieces:
                    piece = self._pieces.popleft()
                elif self._error is not None:
                    raise self._error
                else:
                    return
            yield piece

    def stop(self) -> None:
        """Make `fill` end at its next piece (the consumer has given up)."""
        self._stopped = True
