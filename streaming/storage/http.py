"""Read-only `http://` and `https://` datasets (a web server or CDN) with ranged GETs.

No listing is needed: the index names every shard. Only the standard library is used, so no
extra is required. A `user:password@` in the URL becomes HTTP basic authentication. Writing,
listing and deleting raise UnsupportedFeatureError: publish by writing locally and serving
the folder.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import re
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    ObjectNotFoundError,
    StorageError,
    UnsupportedFeatureError,
)
from streaming.storage.backend import CHUNK, Backend
from streaming.storage.keep_alive import ask, pool, reusable, tls_context
from streaming.storage.retry import CONNECT_TIMEOUT, TIMEOUT, status_error
from streaming.storage.tls_trust import HTTPS_SETTING, untrusted_error
from streaming.storage.watchdog import Watch, watchdog

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _from_url(scheme: str, netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """`http[s]://[user:pass@]host[:port]/path` -> (HTTPBackend(origin), "/path")."""
    userinfo, _, host = netloc.rpartition("@")
    if not host:
        raise StorageError(f"{scheme}://{netloc}{path}: an HTTP URL needs a host")
    return HTTPBackend(scheme, host, unquote(userinfo) or None, **options), path or "/"


def from_http_url(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    return _from_url("http", netloc, path, options)


def from_https_url(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    return _from_url("https", netloc, path, options)


@dataclass(frozen=True)
class HTTPBackend(Backend):
    """One origin (scheme + host); paths are URL paths. Picklable: holds settings only."""

    scheme: str
    host: str
    userinfo: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = TIMEOUT

    parallel_ranges = True

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}{path}"

    def __repr__(self) -> str:  # never print a password
        return f"HTTPBackend({self.scheme}://{self.host})"

    def _key(self) -> tuple:
        return (self.scheme, self.host, self.connect_timeout, self.read_timeout)

    def _connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, timeout=self.connect_timeout, context=tls_context(None))
        else:
            conn = http.client.HTTPConnection(self.host, timeout=self.connect_timeout)
        conn.connect()
        conn.sock.settimeout(self.read_timeout)
        return conn

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        headers = {"Accept-Encoding": "identity", **extra}
        if self.userinfo:
            token = base64.b64encode(self.userinfo.encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        return headers

    @contextlib.contextmanager
    def _request(
        self, method: str, path: str, headers: dict[str, str], deadline: float | None = None
    ) -> Iterator[http.client.HTTPResponse]:
        """Send one request on a pooled connection; typed errors; the connection goes back to
        the pool only when its response was read to the end. The whole exchange, headers
        and body, ends by `deadline` (default: `read_timeout` from now), however slowly the
        server sends (see `watchdog`)."""
        url = self.url(path)
        key = self._key()
        conn = None
        if deadline is None:
            deadline = time.monotonic() + self.read_timeout
        with watchdog.guard(deadline) as watch:
            try:
                conn, response = ask(key, self._connect, method, path, self._headers(headers),
                                     self.read_timeout, watch)
                yield response
                if reusable(response) and not (watch and watch.fired):
                    pool.give(key, conn)  # read to its announced end: the connection is clean
                    conn = None
            except Exception as exc:
                typed = self._typed(url, exc, watch)
                if typed is exc:
                    raise
                raise typed from exc
            finally:
                if conn is not None:
                    conn.close()

    def _typed(self, url: str, exc: Exception, watch: Watch | None) -> Exception:
        """The typed error for a failed exchange (the deadline first when it ended it)."""
        if isinstance(exc, StorageError):
            return exc
        if watch is not None and watch.fired:
            return DownloadTimeoutError(f"{url}: the transfer did not end by its deadline "
                                        f"(download_timeout), however slowly the server sent: "
                                        f"{exc!r}")
        if isinstance(exc, TimeoutError):
            return DownloadTimeoutError(f"{url}: timed out: {exc}")
        if isinstance(exc, ConnectionRefusedError):
            return StorageError(f"{url}: cannot reach {self.scheme}://{self.host}: {exc}")
        if isinstance(exc, socket.gaierror):
            return StorageError(f"{url}: cannot resolve {self.host}: {exc}")
        if isinstance(exc, ssl.SSLCertVerificationError):
            return untrusted_error(url, f"{self.scheme}://{self.host}", exc, HTTPS_SETTING)
        if isinstance(exc, (OSError, http.client.HTTPException)):
            return StorageError(f"{url}: transfer failed: {exc!r}")
        return exc

    def _status_error(self, path: str, response: http.client.HTTPResponse) -> StorageError:
        url, status = self.url(path), response.status
        with contextlib.suppress(Exception):
            response.read(64 << 10)
        if status in (404, 410):
            return ObjectNotFoundError(f"{url}: no such object (HTTP {status})")
        if status in (401, 403):
            how = "check the user:password in the URL" if self.userinfo else (
                "the server wants credentials: put user:password@ in the URL")
            return AccessDeniedError(f"{url}: access denied (HTTP {status}); {how}")
        return status_error(f"{url}: HTTP {status} {response.reason}", status,
                            response.getheader("Retry-After"))

    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        first = start or 0
        headers = {}
        if start is not None or end is not None:
            headers["Range"] = f"bytes={first}-{'' if end is None else end - 1}"
        with self._request("GET", path, headers, deadline) as response:
            if response.status not in (200, 206):
                raise self._status_error(path, response)
            skip = 0
            if response.status == 206:
                got = _CONTENT_RANGE.match(response.getheader("Content-Range") or "")
                if got is None or int(got.group(1)) != first:
                    raise StorageError(f"{self.url(path)}: the server answered bytes "
                                       f"{response.getheader('Content-Range')} for {headers}")
            else:
                skip = first  # the server ignored Range: drop the bytes before `start`
            left = None if end is None else end - first
            while left is None or left > 0:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                if left is not None:
                    chunk = chunk[:left]
                    left -= len(chunk)
                if chunk:
                    yield chunk

    def size(self, path: str) -> int:
        with self._request("HEAD", path, {}) as response:
            response.read()
            length = response.getheader("Content-Length")
            if response.status == 200 and length is not None:
                return int(length)
            if response.status not in (200, 405, 501):
                raise self._status_error(path, response)
        with self._request("GET", path, {"Range": "bytes=0-0"}) as response:  # no HEAD support
            if response.status not in (200, 206):
                raise self._status_error(path, response)
            response.read()
            got = _CONTENT_RANGE.match(response.getheader("Content-Range") or "")
            if response.status == 206 and got and got.group(3) != "*":
                return int(got.group(3))
        raise StorageError(f"{self.url(path)}: the server tells neither Content-Length nor range")

    def _read_only(self, path: str, what: str) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            f"{self.url(path)}: http(s) URLs are read-only ({what} is not possible); write the "
            "dataset to a local folder or object store and serve that folder over HTTP"
        )

    def put(self, path: str, data: bytes) -> None:
        raise self._read_only(path, "writing")

    def upload(self, local: Path, path: str) -> None:
        raise self._read_only(path, "uploading")

    def list(self, prefix: str) -> list[str]:
        raise self._read_only(prefix, "listing")

    def delete(self, path: str) -> None:
        raise self._read_only(path, "deleting")
