"""Read-only `http://` and `https://` datasets (a web server or CDN) with ranged GETs, redirects
followed, reads conditional on a strong ETag.

No listing is needed: the index names every shard. Only the standard library is used, so no
extra is required. A `user:password@` in the URL becomes HTTP basic authentication, sent to that
host only (a redirect to another one goes without it). Writing, listing and deleting raise
UnsupportedFeatureError: publish by writing locally and serving the folder.
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
from urllib.parse import unquote, urljoin, urlsplit

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    ObjectChangedError,
    ObjectNotFoundError,
    StorageError,
    UnsupportedFeatureError,
)
from streaming.storage.backend import CHUNK, Backend, ListedObject
from streaming.storage.keep_alive import ask, pool, reusable, tls_context
from streaming.storage.retry import CONNECT_TIMEOUT, TIMEOUT, status_error
from streaming.storage.tls_trust import HTTPS_SETTING, untrusted_error
from streaming.storage.watchdog import Watch, watchdog

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
MAX_REDIRECTS = 5  # hops one request follows (a hub's file URL to its CDN takes one)
REDIRECTS = (301, 302, 303, 307, 308)


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


def redirect_target(url: str, location: str, asked: str) -> tuple[str, str, str]:
    """(scheme, host, path with its query) a redirect from `url` to `location` (absolute or
    relative) points at; StorageError naming `asked` (the URL first asked) for a target that
    is not http(s), or plain http after https.

    Args:
        url: the URL that answered with the redirect.
        location: its Location header.
        asked: the URL the request was first made for.
    """
    target = urlsplit(urljoin(url, location))
    if target.scheme not in ("http", "https") or not target.hostname:
        raise StorageError(f"{asked}: redirected to {location!r}, not an http(s) URL")
    if url.startswith("https:") and target.scheme == "http":
        raise StorageError(f"{asked}: redirected from https to plain http ({location}); refused")
    where = (target.path or "/") + (f"?{target.query}" if target.query else "")
    return target.scheme, target.netloc.rpartition("@")[2], where


def _strong(etag: str | None) -> str | None:
    """`etag` when it is a strong ETag (quoted, no `W/`), else None."""
    return etag if etag and etag.startswith('"') and etag.endswith('"') else None


def _body(response: http.client.HTTPResponse, skip: int, left: int | None) -> Iterator[bytes]:
    """The response's body in chunks, its first `skip` bytes dropped, at most `left` bytes
    (None: to its end)."""
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


@dataclass(frozen=True)
class HTTPBackend(Backend):
    """One origin (scheme + host); paths are URL paths. Picklable: holds settings only."""

    scheme: str
    host: str
    userinfo: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = TIMEOUT

    parallel_ranges = True
    conditional_reads = True  # on the ETag `version` gives, where the server sends one

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
        """Send one request, following up to MAX_REDIRECTS redirects (to another host too,
        without this one's credentials; never from https to http), and yield the final
        answer. The whole exchange, redirects, headers and body, ends by `deadline` (default:
        `read_timeout` from now), however slowly the servers send (see `watchdog`)."""
        if deadline is None:
            deadline = time.monotonic() + self.read_timeout
        backend, where = self, path
        for _ in range(MAX_REDIRECTS + 1):
            with backend._exchange(method, where, headers, deadline) as response:
                location = response.getheader("Location")
                if response.status not in REDIRECTS or not location:
                    yield response
                    return
                response.read(64 << 10)  # a redirect's short body: the connection stays usable
            backend, where = backend._redirected(where, location, self.url(path))
        raise StorageError(f"{self.url(path)}: more than {MAX_REDIRECTS} redirects")

    def _redirected(self, path: str, location: str, asked: str) -> tuple[HTTPBackend, str]:
        """The server and path a redirect from `path` to `location` points at (`asked`: the
        URL first asked, for messages); this server's credentials go to no other."""
        scheme, host, where = redirect_target(self.url(path), location, asked)
        if (scheme, host) == (self.scheme, self.host):
            return self, where
        return HTTPBackend(scheme, host, None, self.connect_timeout, self.read_timeout), where

    @contextlib.contextmanager
    def _exchange(
        self, method: str, path: str, headers: dict[str, str], deadline: float
    ) -> Iterator[http.client.HTTPResponse]:
        """One request on a pooled connection; typed errors; the connection goes back to the
        pool only when its response was read to the end."""
        url = self.url(path)
        key = self._key()
        conn = None
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

    def iter_chunks_if(self, path: str, start: int | None, end: int | None, if_match: str, *,
                       deadline: float | None = None) -> Iterator[bytes]:
        return self.iter_chunks(path, start, end, deadline=deadline, if_match=if_match)

    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None, if_match: str | None = None,
    ) -> Iterator[bytes]:
        """Bytes [start, end) of `path`; with `if_match`, sent as If-Match, and the answer's
        ETag must be that one too (a server may ignore If-Match): ObjectChangedError if not."""
        first = start or 0
        headers = {} if if_match is None else {"If-Match": if_match}
        if start is not None or end is not None:
            headers["Range"] = f"bytes={first}-{'' if end is None else end - 1}"
        with self._request("GET", path, headers, deadline) as response:
            if response.status == 412 and if_match is not None:
                raise self._changed(path, if_match, "412 Precondition Failed")
            if response.status not in (200, 206):
                raise self._status_error(path, response)
            if if_match is not None and response.getheader("ETag") != if_match:
                raise self._changed(path, if_match, f"ETag {response.getheader('ETag')}")
            skip = 0
            if response.status == 206:
                got = _CONTENT_RANGE.match(response.getheader("Content-Range") or "")
                if got is None or int(got.group(1)) != first:
                    raise StorageError(f"{self.url(path)}: the server answered bytes "
                                       f"{response.getheader('Content-Range')} for {headers}")
            else:
                skip = first  # the server ignored Range: drop the bytes before `start`
            yield from _body(response, skip, None if end is None else end - first)

    def _changed(self, path: str, if_match: str, answer: str) -> ObjectChangedError:
        return ObjectChangedError(f"{self.url(path)}: the object changed since its version was "
                                  f"recorded (ETag {if_match}; the server answered {answer})")

    def size(self, path: str) -> int:
        return self.version(path).size

    def version(self, path: str) -> ListedObject:
        """The object's size from a HEAD (a one-byte ranged GET where HEAD is not served), and
        its ETag when the answer gives a strong one (a weak `W/` ETag cannot be matched byte
        for byte, so none is kept)."""
        with self._request("HEAD", path, {}) as response:
            response.read()
            length = response.getheader("Content-Length")
            if response.status == 200 and length is not None:
                return ListedObject(int(length), _strong(response.getheader("ETag")))
            if response.status not in (200, 405, 501):
                raise self._status_error(path, response)
        with self._request("GET", path, {"Range": "bytes=0-0"}) as response:  # no HEAD support
            if response.status not in (200, 206):
                raise self._status_error(path, response)
            response.read()
            got = _CONTENT_RANGE.match(response.getheader("Content-Range") or "")
            if response.status == 206 and got and got.group(3) != "*":
                return ListedObject(int(got.group(3)), _strong(response.getheader("ETag")))
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
