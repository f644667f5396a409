"""Connections kept alive between requests to the same server, and the TLS settings they
share, for this process's plain-`http.client` transports (`http` and the boto3-free S3 GETs).

A new HTTPS connection costs a TCP and a TLS handshake (round trips and milliseconds of CPU),
and a new TLS context costs loading the system's certificates (tens of milliseconds): a remote
of many small objects (side files, indexes) would pay them on every GET. A connection goes back
to the pool only after its response was read to its announced end; a forked process never uses
its parent's sockets.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import http.client
import os
import socket
import ssl
from collections.abc import Callable, Hashable

from streaming.storage.watchdog import Watch
from streaming.util.fork_safe_lock import ForkSafeLock

IDLE_PER_SERVER = 32  # kept-alive connections per process and server
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)  # idle and dropped
QUICK_ACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class ConnectionPool:
    """Idle keep-alive connections by key (scheme, host, port and timeouts), for this process
    only."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.idle: dict[Hashable, list[http.client.HTTPConnection]] = {}
        self.lock = ForkSafeLock()  # a child forked while a thread here held it can take it

    def take(self, key: Hashable) -> http.client.HTTPConnection | None:
        """An idle connection for `key`, or None.

        Args:
            key: what the connection must match.
        """
        with self.lock:
            if self.pid != os.getpid():  # forked: the parent's sockets are not ours
                self.idle.clear()
                self.pid = os.getpid()
            free = self.idle.get(key)
            return free.pop() if free else None

    def give(self, key: Hashable, conn: http.client.HTTPConnection) -> None:
        """Keep `conn`, whose last response was read to its end, for the next request to
        `key` (closed instead when IDLE_PER_SERVER are kept already).

        Args:
            key: what the connection matches.
            conn: the connection.
        """
        with self.lock:
            free = self.idle.setdefault(key, [])
            if self.pid == os.getpid() and len(free) < IDLE_PER_SERVER:
                free.append(conn)
                return
        conn.close()

    def close_all(self) -> None:
        """Close every idle connection of this process (at interpreter exit)."""
        with self.lock:
            idle, self.idle = self.idle, {}
        if self.pid == os.getpid():
            for conns in idle.values():
                for conn in conns:
                    conn.close()


def exchange(conn: http.client.HTTPConnection, method: str, path: str,
             headers: dict[str, str]) -> http.client.HTTPResponse:
    """Send one request on `conn` and read its answer's status and headers.

    A kept-alive connection has left the kernel's quick-ACK mode, so the ACK of the answer's
    first small segment waits up to 40 ms for data to ride on. A server that writes headers
    and body apart with Nagle's algorithm on (Python's `http.server`, for one) holds the body
    back for that ACK: 40 ms a GET. Quick ACKs are asked for once the request is out (Linux).

    Args:
        conn: the connection.
        method: the HTTP method.
        path: the request target.
        headers: the request's headers.
    """
    conn.request(method, path, headers=headers)
    if QUICK_ACK is not None and conn.sock is not None:
        with contextlib.suppress(OSError):
            conn.sock.setsockopt(socket.IPPROTO_TCP, QUICK_ACK, 1)
    return conn.getresponse()


def ask(key: Hashable, connect: Callable[[], http.client.HTTPConnection], method: str,
        path: str, headers: dict[str, str], head_timeout: float, watch: Watch | None = None,
        ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """(connection, answer) of one request: on a kept-alive connection for `key` when the pool
    has one (a fresh one from `connect` when the server dropped it while it sat idle), else on
    a fresh one. The caller gives the connection back (`pool.give`) once the answer was read to
    its end, or closes it; a connection is closed here when the request fails.

    Args:
        key: what a pooled connection must match.
        connect: makes a new connection.
        method: the HTTP method.
        path: the request target.
        headers: the request's headers.
        head_timeout: seconds a kept-alive connection waits for the answer's headers (a new
            one waits as `connect` set it up).
        watch: the watchdog's guard of the request (see `watchdog`), told its connection.
    """
    reused = pool.take(key)
    conn = reused or connect()
    try:
        if reused is not None and reused.sock is not None:
            reused.sock.settimeout(head_timeout)
        if watch is not None:
            watch.attach(conn)
        try:
            return conn, exchange(conn, method, path, headers)
        except STALE:
            if reused is None:
                raise
            conn.close()
            conn = connect()
            if watch is not None:
                watch.attach(conn)
            return conn, exchange(conn, method, path, headers)
    except BaseException:
        conn.close()
        raise


def reusable(response: http.client.HTTPResponse) -> bool:
    """Whether the connection of `response` can carry another request: the response was read
    to its announced end and the server did not ask to close.

    Args:
        response: a response read by the caller.
    """
    return response.isclosed() and not response.will_close and response.length == 0


@functools.lru_cache(maxsize=4)
def tls_context(cafile: str | None) -> ssl.SSLContext:
    """The TLS settings of every HTTPS connection that trusts `cafile` (None or "": the
    system's certificates), made once per process. A context is safe to share between threads.

    Args:
        cafile: a certificate bundle (`AWS_CA_BUNDLE`), if any.
    """
    return ssl.create_default_context(cafile=cafile or None)


pool = ConnectionPool()
atexit.register(pool.close_all)
