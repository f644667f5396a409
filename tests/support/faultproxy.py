"""A loopback HTTP reverse proxy that injects faults between a client and an upstream server.

Faults (chosen per request with a seeded RNG at `rate`, or always for `fail_keys`, or for
every request during a `Storm`):
  "500", "503"  an S3-style XML error response ("429" too, but only when asked for by name);
                503 and 429 carry `Retry-After: retry_after` when that is set
  "reset"       the connection is reset (RST) before any response
  "stall"       headers and half the body, then silence for `stall_seconds` (bounded)
  "truncate"    headers promising the full body, half of it, then the connection closes
(a HEAD request has no body to stall or cut: it gets "reset" instead)
With `bandwidth` (bytes per second), every response body is paced to that rate on its own
connection, as a store that caps each connection does.
Everything is counted and every request is logged with its arrival time and fault; the proxy
shuts itself down after `lifetime` seconds at the latest.

Use from any test folder:  from tests.support.faultproxy import fault_proxy  # noqa: F401
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

FAULTS = ("500", "503", "reset", "stall", "truncate")  # what `rate` draws from by default
KINDS = (*FAULTS, "429")
MAX_STALL = 30.0
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
_ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
    "<Message>injected by the fault proxy</Message></Error>"
)
_CODES = {"500": "InternalError", "503": "SlowDown", "429": "TooManyRequests"}


@dataclass
class Storm:
    """Every GET/HEAD gets `fault` for `seconds`, starting with the first request after
    `after` requests whose path contains `keys`; `start` is set when it begins."""

    after: int
    seconds: float
    fault: str = "503"
    keys: str = ""
    start: float | None = None

    def window(self) -> tuple[float, float]:
        """(start, end) in time.monotonic() seconds; (inf, inf) if it never began."""
        start = float("inf") if self.start is None else self.start
        return start, start + self.seconds


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: more clients connecting at once than that
    # lose their SYN and retry it a second later, which a store does not do to them.
    request_queue_size = 128


@dataclass(frozen=True)
class Request:
    """One request as the proxy saw it."""

    at: float  # time.monotonic()
    method: str
    path: str
    fault: str | None


class FaultProxy:
    """Forward HTTP to `upstream`, injecting faults; `.endpoint` is the proxy's own URL."""

    def __init__(
        self, upstream: str, *, rate: float = 0.0, seed: int = 0, faults: Iterable[str] = FAULTS,
        methods: Iterable[str] = ("GET", "HEAD"), fail_keys: Iterable[str] = (),
        fail_with: str = "500", stall_seconds: float = 3.0, delay: float = 0.0,
        lifetime: float = 300.0, max_faults: int | None = None, storm: Storm | None = None,
        retry_after: float | None = None, bandwidth: float | None = None,
    ) -> None:
        self.faults = tuple(faults)
        asked = {*self.faults, fail_with, *([storm.fault] if storm else [])}
        if unknown := asked - set(KINDS):
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {KINDS}")
        self.storm, self.retry_after = storm, retry_after
        self.log: list[Request] = []
        target = urlsplit(upstream)
        self.upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self.rate, self.methods = rate, {m.upper() for m in methods}
        self.fail_keys, self.fail_with = tuple(fail_keys), fail_with
        self.stall_seconds = min(stall_seconds, MAX_STALL)
        self.delay = delay
        self.bandwidth = bandwidth
        self.max_faults = max_faults
        self.injected: Counter[str] = Counter()
        self.requests: Counter[tuple[str, str]] = Counter()
        self.ranges: dict[tuple[str, str], list[str | None]] = {}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()

    def count(self, method: str, path: str) -> int:
        """How many `method` requests reached the proxy for `path` (e.g. "/bucket/key")."""
        with self._lock:
            return self.requests[(method.upper(), path)]

    def header_values(self, method: str, path: str, header: str = "Range") -> list[str | None]:
        """The `Range` header of each `method` request for `path`, in arrival order (None: no
        range asked for)."""
        if header.lower() != "range":
            raise ValueError("only the Range header is recorded")
        with self._lock:
            return list(self.ranges.get((method.upper(), path), []))

    def choose_fault(self, method: str, path: str, range_header: str | None = None) -> str | None:
        """Record the request and decide which fault (if any) it gets."""
        with self._lock:
            self.requests[(method, path)] += 1
            self.ranges.setdefault((method, path), []).append(range_header)
            spent = self.max_faults is not None and sum(self.injected.values()) >= self.max_faults
            fault: str | None = None
            if self._storming(method, path):
                fault = self.storm.fault
            elif spent:
                pass
            elif any(key in path for key in self.fail_keys):
                fault = self.fail_with
            elif method in self.methods and self.faults and self._rng.random() < self.rate:
                fault = self._rng.choice(self.faults)
            if fault:
                self.injected[fault] += 1
            self.log.append(Request(time.monotonic(), method, path, fault))
            return fault

    def _storming(self, method: str, path: str) -> bool:
        storm = self.storm
        if storm is None or method not in ("GET", "HEAD"):
            return False
        if storm.start is None:
            seen = sum(1 for r in self.log if storm.keys in r.path)
            if seen < storm.after:
                return False
            storm.start = time.monotonic()
        return time.monotonic() < storm.window()[1]

    def requests_between(self, start: float, end: float) -> int:
        """How many requests arrived in [start, end) (time.monotonic() seconds)."""
        with self._lock:
            return sum(1 for r in self.log if start <= r.at < end)

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake up at once when the proxy closes."""
        self._stopped.wait(seconds)

    def close(self) -> None:
        """Stop serving; stalled handlers wake up and drop their connections."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_ProxyHandler):
        pass

    Handler.proxy = proxy
    return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK wait

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(*self.proxy.upstream, timeout=60)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            return response.status, kept, payload
        finally:
            conn.close()

    def _handle(self) -> None:
        body = self._read_body()
        path = urlsplit(self.path).path
        fault = self.proxy.choose_fault(self.command, path, self.headers.get("Range"))
        if self.proxy.delay:
            self.proxy.sleep(self.proxy.delay)
        if fault == "reset" or (fault in ("stall", "truncate") and self.command == "HEAD"):
            self._reset()
            return
        if fault in _CODES:
            headers = [("Content-Type", "application/xml")]
            if fault != "500" and self.proxy.retry_after is not None:
                headers.append(("Retry-After", f"{self.proxy.retry_after:g}"))
            self._respond(int(fault), headers, _ERROR_XML.format(code=_CODES[fault]).encode())
            return
        if self.proxy.bandwidth and fault is None and self.command == "GET":
            self._relay_paced()
            return
        status, headers, payload = self._forward(body)
        if fault in ("stall", "truncate"):
            self._respond(status, headers, payload, cut=len(payload) // 2)
            if fault == "stall":
                self.proxy.sleep(self.proxy.stall_seconds)
            self.close_connection = True
            return
        self._respond(status, headers, payload)

    def _relay_paced(self) -> None:
        """Pass the upstream answer on while it arrives, paced to `bandwidth` (a store sends
        its first bytes before its last)."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        conn = http.client.HTTPConnection(*self.proxy.upstream, timeout=60)
        try:
            conn.request("GET", self.path, headers=headers)
            response = conn.getresponse()
            self.send_response_only(response.status)
            for key, value in response.getheaders():
                if key.lower() not in ("date", "server", *_HOP_BY_HOP):
                    self.send_header(key, value)
            self.end_headers()
            step = self._pace_step()
            self._write_paced(iter(lambda: response.read(step), b""))
        except OSError:  # the upstream failed: the client sees the connection close
            pass
        finally:
            self.close_connection = True
            conn.close()

    def _respond(
        self, status: int, headers: list[tuple[str, str]], payload: bytes, cut: int | None = None
    ) -> None:
        self.send_response_only(status)
        keep_length = self.command == "HEAD"  # a HEAD answer announces the object's length
        for key, value in headers:
            if key.lower() not in ("date", "server") and (
                keep_length or key.lower() != "content-length"
            ):
                self.send_header(key, value)
        if not keep_length:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self._send_body(payload if cut is None else payload[:cut])
        self.wfile.flush()

    def _send_body(self, body: bytes) -> None:
        if not self.proxy.bandwidth:
            self.wfile.write(body)
            return
        step = self._pace_step()
        self._write_paced(body[start:start + step] for start in range(0, len(body), step))

    def _pace_step(self) -> int:
        """Bytes per slice of a paced body: a slice every 10 ms."""
        return max(int(float(self.proxy.bandwidth or 1) / 100), 1)

    def _write_paced(self, pieces: Iterable[bytes]) -> None:
        """Write `pieces`, each followed by the time it takes at `bandwidth`."""
        rate = float(self.proxy.bandwidth or 1)
        try:
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                self.proxy.sleep(len(piece) / rate)
        except OSError:  # the client hung up before the end (it needed no more)
            self.close_connection = True

    def _reset(self) -> None:
        """Abort the TCP connection with RST instead of a clean close."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle


@pytest.fixture
def fault_proxy(s3_server) -> Iterator:
    """Factory: `fault_proxy(rate=0.2, seed=1, ...)` -> a FaultProxy in front of the S3 server."""
    proxies: list[FaultProxy] = []

    def make(**options: object) -> FaultProxy:
        proxy = FaultProxy(s3_server.endpoint, **options)
        proxies.append(proxy)
        return proxy

    try:
        yield make
    finally:
        for proxy in proxies:
            proxy.close()
