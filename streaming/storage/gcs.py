"""Google Cloud Storage (`gs://bucket/key`) through google-cloud-storage (extra `gcs`).

Credentials are found the way Google's libraries find them (GOOGLE_APPLICATION_CREDENTIALS,
gcloud's application-default login, the metadata server); with none, requests go out anonymous,
which public buckets allow. `STORAGE_EMULATOR_HOST` points at an emulator. Metadata, listing,
uploads and deletes go through the storage client; object bytes are read with the client's own
authorized HTTP session from the JSON API media endpoint, streamed chunk by chunk (the client's
download calls write into a file and cannot hand bytes over as they arrive). The libraries' own
retries are off: `transfer.py` owns retrying.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    ObjectNotFoundError,
    StorageError,
    require,
)
from streaming.storage.backend import CHUNK, Backend
from streaming.storage.per_process import PerProcess
from streaming.storage.retry import CONNECT_TIMEOUT, TIMEOUT, status_error
from streaming.storage.tls_trust import REQUESTS_SETTING, untrusted, untrusted_error

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
_DEFAULT_ENDPOINT = "https://storage.googleapis.com"
# Env settings that change which credentials or endpoint a new client uses (client cache key).
_CLIENT_ENV = (
    EMULATOR_ENV, "API_ENDPOINT_OVERRIDE", "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CONFIG",
)
_HOW_TO_AUTH = (
    "no Google Cloud credentials found (the request went out anonymous): set "
    "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run "
    "`gcloud auth application-default login`, or run where a metadata server provides them"
)


def from_url(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """`gs://bucket/key` -> (GCSBackend(bucket), key)."""
    if not netloc:
        raise StorageError(f"gs://{path.lstrip('/')}: a GCS URL needs a bucket (gs://bucket/key)")
    return GCSBackend(netloc, **options), path.lstrip("/")


@dataclass(frozen=True)
class _Clients:
    """One process's storage client and the authorized HTTP session it talks through."""

    storage: Any
    session: Any
    endpoint: str
    anonymous: bool


_clients: PerProcess[_Clients] = PerProcess()


def _endpoint() -> str:
    host = os.environ.get(EMULATOR_ENV) or ""
    if host and "://" not in host:
        host = "http://" + host
    return (host or os.environ.get("API_ENDPOINT_OVERRIDE") or _DEFAULT_ENDPOINT).rstrip("/")


def _get_clients() -> _Clients:
    """This process's clients for the current environment, created on first use."""
    return _clients.get(tuple(os.environ.get(k) for k in _CLIENT_ENV), _new_clients)


def _new_clients() -> _Clients:
    storage = require("google.cloud.storage", feature="gs:// URLs", extra="gcs",
                      package="google-cloud-storage")
    import google.auth
    from google.auth.credentials import AnonymousCredentials
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession
    from requests.adapters import HTTPAdapter

    project = os.environ.get("GOOGLE_CLOUD_PROJECT")
    anonymous = bool(os.environ.get(EMULATOR_ENV))
    credentials: Any = AnonymousCredentials()
    if not anonymous:
        try:
            credentials, found = google.auth.default(scopes=list(storage.Client.SCOPE))
            project = project or found
        except DefaultCredentialsError:
            anonymous, credentials = True, AnonymousCredentials()
    session = AuthorizedSession(credentials)
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=32, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    client = storage.Client(project=project, credentials=credentials, _http=session)
    return _Clients(client, session, _endpoint(), anonymous)


@dataclass(frozen=True)
class GCSBackend(Backend):
    """One bucket; paths are object names. Picklable: holds settings only."""

    bucket: str
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = TIMEOUT

    parallel_ranges = True

    def url(self, path: str) -> str:
        return f"gs://{self.bucket}/{path}"

    @property
    def _timeout(self) -> tuple[float, float]:
        return (self.connect_timeout, self.read_timeout)

    def _blob(self, path: str) -> Any:
        return _get_clients().storage.bucket(self.bucket).blob(path)

    def _error(self, exc: Exception, path: str) -> StorageError:
        """Map a google-api-core / requests failure to a typed error naming the object."""
        import requests
        import urllib3
        from google.api_core import exceptions as gx
        from google.auth.exceptions import DefaultCredentialsError, RefreshError

        url, where = self.url(path), _endpoint()
        if isinstance(exc, gx.GoogleAPICallError):
            headers = getattr(exc.response, "headers", None) or {}
            return self._status_error(path, int(exc.code or 0), exc.message,
                                      headers.get("Retry-After"))
        if isinstance(exc, (DefaultCredentialsError, RefreshError)):
            return AccessDeniedError(f"{url}: cannot obtain Google credentials: {exc}")
        if (bad := untrusted(exc)) is not None:
            return untrusted_error(url, where, bad, REQUESTS_SETTING)
        inner = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else None
        reason = getattr(inner, "reason", inner)  # urllib3's MaxRetryError wraps the cause
        if isinstance(reason, urllib3.exceptions.NewConnectionError):  # before timeouts: is one
            return StorageError(f"{url}: cannot reach the GCS endpoint {where}: {exc}")
        if isinstance(exc, (requests.Timeout, TimeoutError)) or isinstance(
            reason, (urllib3.exceptions.TimeoutError, TimeoutError)
        ):
            return DownloadTimeoutError(f"{url}: timed out talking to {where}: {exc}")
        return StorageError(f"{url}: transfer from {where} failed: {exc!r}")

    def _status_error(self, path: str, status: int, message: str,
                      retry_after: str | None = None) -> StorageError:
        url = self.url(path)
        if status == 404:
            if not self._bucket_exists(path):
                return ObjectNotFoundError(self._no_bucket(path))
            return ObjectNotFoundError(f"{url}: no such object")
        if status in (401, 403):
            clients = _get_clients()
            if clients.anonymous and not os.environ.get(EMULATOR_ENV):
                return AccessDeniedError(f"{url}: {_HOW_TO_AUTH}")
            return AccessDeniedError(
                f"{url}: access denied ({status}); check the credentials and the bucket's IAM"
            )
        return status_error(f"{url}: GCS error {status}: {message}", status, retry_after)

    def _bucket_exists(self, path: str) -> bool:
        """Whether the bucket exists (a 404 alone cannot tell a missing object from it)."""
        from google.api_core import exceptions as gx

        try:
            bucket = _get_clients().storage.bucket(self.bucket)
            return bool(bucket.exists(timeout=self._timeout, retry=None))
        except gx.GoogleAPICallError:
            return True  # cannot tell: report the object as missing

    def _no_bucket(self, path: str) -> str:
        return f"{self.url(path)}: bucket {self.bucket!r} does not exist at {_endpoint()}"

    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        clients = _get_clients()
        media = (f"{clients.endpoint}/download/storage/v1/b/{quote(self.bucket, safe='')}"
                 f"/o/{quote(path, safe='')}?alt=media")
        headers = {"Accept-Encoding": "identity"}
        if start is not None or end is not None:
            headers["Range"] = f"bytes={start or 0}-{'' if end is None else end - 1}"
        with self._translated(path):
            response = clients.session.get(media, headers=headers, stream=True,
                                           timeout=self._timeout)
            try:
                if response.status_code not in (200, 206):
                    raise self._status_error(path, response.status_code, _message(response),
                                             response.headers.get("Retry-After"))
                yield from response.iter_content(CHUNK)
            finally:
                response.close()

    def size(self, path: str) -> int:
        with self._translated(path):
            blob = self._blob(path)
            blob.reload(timeout=self._timeout, retry=None)
            return int(blob.size)

    def put(self, path: str, data: bytes) -> None:
        with self._translated(path):
            self._blob(path).upload_from_string(data, timeout=self._timeout, retry=None)

    def upload(self, local: Path, path: str) -> None:
        if not os.path.isfile(local):
            raise ObjectNotFoundError(f"{local}: no such file to upload to {self.url(path)}")
        with self._translated(path):
            self._blob(path).upload_from_filename(str(local), timeout=self._timeout, retry=None)

    def list(self, prefix: str) -> list[str]:
        with self._translated(prefix):
            blobs = _get_clients().storage.list_blobs(
                self.bucket, prefix=prefix, timeout=self._timeout, retry=None
            )
            return sorted(blob.name for blob in blobs)

    def list_sizes(self, prefix: str) -> dict[str, int]:
        with self._translated(prefix):
            blobs = _get_clients().storage.list_blobs(
                self.bucket, prefix=prefix, timeout=self._timeout, retry=None
            )
            return dict(sorted((blob.name, int(blob.size)) for blob in blobs))

    def delete(self, path: str) -> None:
        from google.api_core import exceptions as gx

        with self._translated(path), contextlib.suppress(gx.NotFound):
            self._blob(path).delete(timeout=self._timeout, retry=None)


def _message(response: Any) -> str:
    """The error text of a failed JSON API response (JSON or XML body), briefly."""
    with contextlib.suppress(Exception):
        return str(response.json()["error"]["message"])
    return (response.text or response.reason or "")[:200]
