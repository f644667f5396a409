"""Signed S3 GETs without boto3: the `index.json` every start reads, and the shards a fresh
cache downloads.

Building a boto3 client (importing botocore, parsing its service models) takes seconds on a
busy machine: more than everything else a warm start does, and a large part of a fresh start's
first batch. When the credentials are plain environment variables and the endpoint is known
without botocore's configuration (`S3_ENDPOINT_URL`, or a region from the environment for AWS
itself), a GET (whole or a byte range) is signed here with AWS Signature Version 4 and sent
with `http.client`. Anything else (other credential sources, a proxy in the way, an answer
other than the expected 200 or 206, an error before the body starts) returns None and the caller
takes the boto3 path, which owns error reporting; but a server error or throttling answer
(5xx, 408, 429) is raised as the StorageError the boto3 path would raise, so a struggling store
gets one request per attempt, not two, and a certificate this process does not trust is an
UntrustedCertificateError at once (boto3 trusts the same authorities: `AWS_CA_BUNDLE`). Once
the body has started, a failure is a StorageError (DownloadTimeoutError for a timeout) that the
caller's retries handle. Connections are kept alive between GETs to one server, and HTTPS ones
share one TLS context (`keep_alive`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import os
import re
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from streaming.errors import DownloadTimeoutError, StorageError
from streaming.storage.keep_alive import ask, pool, reusable, tls_context
from streaming.storage.retry import status_error
from streaming.storage.tls_trust import S3_SETTING, untrusted_error
from streaming.storage.watchdog import Watch, watchdog

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# botocore settings that change the endpoint or the transport: leave those requests to it.
_BOTOCORE_ONLY = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_USE_FIPS_ENDPOINT",
                  "AWS_USE_DUALSTACK_ENDPOINT", "AWS_S3_USE_ARN_REGION", "AWS_PROFILE")
_PLAIN_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class Credentials:
    """AWS credentials taken from the environment."""

    key: str
    secret: str
    token: str | None


@dataclass(frozen=True)
class Target:
    """Where one object's GET goes: `scheme://host[:port]/path`, signed for `region`."""

    scheme: str
    host: str
    port: int | None
    path: str
    region: str

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port in (None, default) else f"{self.host}:{self.port}"


def env_credentials() -> Credentials | None:
    """Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), the
    first source botocore itself consults; None when they are not both set."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret or any(os.environ.get(name) for name in _BOTOCORE_ONLY):
        return None
    return Credentials(key, secret, os.environ.get("AWS_SESSION_TOKEN") or None)


def target_for(bucket: str, key: str, endpoint: str | None, region: str | None
               ) -> Target | None:
    """The request target of `key` in `bucket`: path style under `endpoint`, or AWS's
    virtual-hosted form for a region known from the argument or the environment."""
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    object_path = "/" + quote(key, safe="/~")
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            return None
        base = parts.path.rstrip("/")
        return Target(parts.scheme, parts.hostname, parts.port,
                      f"{quote(base, safe='/~')}/{quote(bucket, safe='~')}{object_path}",
                      region or "us-east-1")
    if not region or region.startswith(("cn-", "us-iso")) or not _PLAIN_BUCKET.match(bucket):
        return None
    if os.path.exists(os.environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config")):
        return None  # it may name another endpoint for S3: botocore reads it
    return Target("https", f"{bucket}.s3.{region}.amazonaws.com", None, object_path, region)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_headers(target: Target, creds: Credentials, now: float) -> dict[str, str]:
    """The headers of a GET of `target` signed with Signature Version 4 at time `now`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    day = stamp[:8]
    headers = {"host": target.host_header, "x-amz-content-sha256": EMPTY_SHA256,
               "x-amz-date": stamp}
    if creds.token:
        headers["x-amz-security-token"] = creds.token
    names = sorted(headers)
    canonical = "\n".join(["GET", target.path, "", *(f"{n}:{headers[n]}" for n in names), "",
                           ";".join(names), EMPTY_SHA256])
    scope = f"{day}/{target.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(("AWS4" + creds.secret).encode(), day)
    for part in (target.region, "s3", "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={creds.key}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return headers


def _proxied(target: Target) -> bool:
    proxies = urllib.request.getproxies()
    return target.scheme in proxies and not urllib.request.proxy_bypass(target.host)


def _connection(target: Target, timeout: float) -> http.client.HTTPConnection:
    if target.scheme == "http":
        return http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    return http.client.HTTPSConnection(target.host, target.port, timeout=timeout,
                                       context=tls_context(os.environ.get("AWS_CA_BUNDLE")))


def _answer(target: Target, headers: dict[str, str], timeout: float, watch: Watch
            ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, tuple]:
    """(connection, response, pool key) of one GET whose headers arrived (`keep_alive.ask`)."""
    key = (target.scheme, target.host, target.port, timeout, os.environ.get("AWS_CA_BUNDLE"))
    conn, response = ask(key, lambda: _connection(target, timeout), "GET", target.path, headers,
                         timeout, watch)
    return conn, response, key


def quick_stream(bucket: str, key: str, endpoint: str | None, region: str | None, *,
                 connect_timeout: float, read_timeout: float, start: int | None = None,
                 end: int | None = None, chunk: int = 1 << 20, deadline: float | None = None,
                 if_match: str | None = None) -> Iterator[bytes] | None:
    """Bytes [start, end) of object `key` of `bucket` (all of it without a range) in pieces of
    up to `chunk` bytes as they arrive, or None when this path cannot fetch it (see the
    module's docstring).

    Args:
        bucket: the bucket's name.
        key: the object's key.
        endpoint: an S3-compatible service's URL (`S3_ENDPOINT_URL`), or None for AWS.
        region: the region to sign for (None: from the environment).
        connect_timeout: seconds to connect and to wait for the answer's headers.
        read_timeout: seconds each read of the body may wait.
        start: the first byte (None: 0).
        end: one past the last byte (None: the end of the object).
        chunk: bytes per piece.
        deadline: when the whole GET must be over (a time.monotonic() value; default:
            `read_timeout` from now), however slowly the server sends (see `watchdog`).
        if_match: the ETag the object must still have (any other answer than the bytes,
            412 included, returns None: the SDK's path asks again and names the failure).
    """
    creds = env_credentials()
    target = None if creds is None else target_for(bucket, key, endpoint, region)
    if creds is None or target is None or _proxied(target):
        return None
    headers = signed_headers(target, creds, time.time())
    ranged = start is not None or end is not None
    if ranged:
        headers["range"] = f"bytes={start or 0}-{'' if end is None else end - 1}"
    if if_match is not None:
        headers["if-match"] = if_match
    guard = watchdog.guard(time.monotonic() + read_timeout if deadline is None else deadline)
    watch = guard.__enter__()  # left by _body when the body ends, or here
    try:
        conn, response, pool_key = _answer(target, headers, connect_timeout, watch)
    except ssl.SSLCertVerificationError as exc:  # boto3 would trust the same authorities
        guard.__exit__(None, None, None)
        raise untrusted_error(f"s3://{bucket}/{key}", endpoint or f"https://{target.host}",
                              exc, S3_SETTING) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        guard.__exit__(None, None, None)
        if watch is not None and watch.fired:
            raise DownloadTimeoutError(f"s3://{bucket}/{key}: no answer by the transfer's "
                                       f"deadline (download_timeout): {exc!r}") from exc
        return None
    if conn.sock is not None:
        conn.sock.settimeout(read_timeout)
    url, status = f"s3://{bucket}/{key}", response.status
    length = response.getheader("content-length")
    if status != (206 if ranged else 200) or not length or not length.isdigit():
        conn.close()
        guard.__exit__(None, None, None)
        if status >= 500 or status in (408, 429):
            raise status_error(f"{url}: S3 error {status}: {response.reason}", status,
                               response.getheader("retry-after"))
        return None
    return _body(conn, response, int(length), chunk, url, pool_key, guard, watch)


def _body(conn: http.client.HTTPConnection | None, response: http.client.HTTPResponse,
          length: int, chunk: int, url: str, pool_key: tuple,
          guard: contextlib.AbstractContextManager, watch: Watch | None) -> Iterator[bytes]:
    got = 0
    try:
        while piece := response.read(chunk):
            got += len(piece)
            yield piece
        if got != length:
            raise StorageError(f"{url}: the transfer broke off after {got} of {length} bytes")
        if reusable(response) and conn is not None and not (watch and watch.fired):
            pool.give(pool_key, conn)  # read to its end: the next GET to this server may use it
            conn = None
    except TimeoutError as exc:
        raise DownloadTimeoutError(f"{url}: timed out reading the object: {exc}") from exc
    except (OSError, http.client.HTTPException, StorageError) as exc:
        if watch is not None and watch.fired:
            raise DownloadTimeoutError(f"{url}: the transfer did not end by its deadline "
                                       f"(download_timeout): {exc!r}") from exc
        if isinstance(exc, StorageError):
            raise
        raise StorageError(f"{url}: the transfer broke off: {exc!r}") from exc
    finally:
        guard.__exit__(None, None, None)
        if conn is not None:
            conn.close()

