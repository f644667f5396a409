"""Deadlines that hold for a whole transfer, however the server paces its bytes.

A socket timeout bounds one read; a server that sends one byte every half second never trips
it, and `http.client` reads a body (and a header line) in many such reads. The watchdog ends
the transfer instead: each guarded request registers its connection with a deadline, and one
thread per process shuts the connection's socket down once the deadline passes, which makes
the blocked read return at once. The transfer then fails as a DownloadTimeoutError.
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from streaming.util.fork_safe_lock import ForkSafeLock


@dataclass
class Watch:
    """One guarded request: its deadline, its connection once made, whether it was ended."""

    deadline: float
    conn: http.client.HTTPConnection | None = None
    fired: bool = False
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, conn: http.client.HTTPConnection) -> None:
        """The connection the request runs on (shut at once if the deadline already passed).

        Args:
            conn: the request's connection.
        """
        with self.lock:
            self.conn = conn
        if time.monotonic() >= self.deadline:
            self.expire()

    def expire(self) -> None:
        """End the request: shut its socket down so a blocked read returns."""
        with self.lock:
            if self.done:
                return
            self.fired = True
            sock = None if self.conn is None else self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain call, TLS too


class Watchdog:
    """The process's one thread that ends guarded requests at their deadlines."""

    def __init__(self) -> None:
        self._lock = ForkSafeLock()
        self._wake = threading.Event()
        self._heap: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._pid: int | None = None

    @contextlib.contextmanager
    def guard(self, deadline: float | None) -> Iterator[Watch | None]:
        """A Watch for a request that must end by `deadline` (a time.monotonic() value);
        None (no guard) without a deadline.

        Args:
            deadline: when the request must be over.
        """
        if deadline is None:
            yield None
            return
        watch = Watch(deadline)
        with self._lock:
            self._start()
            heapq.heappush(self._heap, (deadline, next(self._order), watch))
        self._wake.set()
        try:
            yield watch
        finally:
            with watch.lock:
                watch.done = True

    def _start(self) -> None:
        if self._pid == os.getpid():
            return
        self._pid, self._heap = os.getpid(), []  # a forked child: its parent's thread is gone
        threading.Thread(target=self._run, name="streaming-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = []
                while self._heap and (self._heap[0][0] <= now or self._heap[0][2].done):
                    due.append(heapq.heappop(self._heap)[2])
                wait = self._heap[0][0] - now if self._heap else 60.0
            for watch in due:
                watch.expire()
            self._wake.wait(max(wait, 0.005))
            self._wake.clear()


watchdog = Watchdog()
