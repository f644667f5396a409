"""Azure Blob Storage through azure-storage-blob (extra `azure`).

URL forms: `az://container/key` or `azure://container/key` (account from the connection string
or the environment), `abfs[s]://container@account.dfs.core.windows.net/key` and
`https://account.blob.core.windows.net/container/key`. Credentials, first found wins:
AZURE_STORAGE_CONNECTION_STRING, an account key (AZURE_STORAGE_ACCOUNT_KEY), a SAS token
(AZURE_STORAGE_SAS_TOKEN), DefaultAzureCredential when azure-identity is installed, else
anonymous (public containers). The SDK's own retries are off: `transfer.py` owns retrying.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    ObjectChangedError,
    ObjectNotFoundError,
    StorageError,
    require,
)
from streaming.storage.backend import CHUNK, Backend, ListedObject
from streaming.storage.per_process import PerProcess
from streaming.storage.retry import CONNECT_TIMEOUT, TIMEOUT, status_error
from streaming.storage.tls_trust import REQUESTS_SETTING, untrusted, untrusted_error

CONNECTION_STRING_ENV = "AZURE_STORAGE_CONNECTION_STRING"
# The second names of each pair are those the reference implementation and LitData read.
ACCOUNT_ENV = ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT")
KEY_ENV = ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_ACCOUNT_ACCESS_KEY", "AZURE_STORAGE_KEY")
SAS_ENV = "AZURE_STORAGE_SAS_TOKEN"
_CLIENT_ENV = (CONNECTION_STRING_ENV, *ACCOUNT_ENV, *KEY_ENV, SAS_ENV, "AZURE_CLIENT_ID",
               "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET")
_HOW_TO_AUTH = (
    "no Azure credentials found: set AZURE_STORAGE_CONNECTION_STRING, or "
    "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN, or "
    "install azure-identity and sign in (az login, a managed identity, AZURE_CLIENT_ID...)"
)
_MISSING_CONTAINER = "ContainerNotFound"
_ACCESS_CODES = {"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch",
                 "InsufficientAccountPermissions", "NoAuthenticationInformation"}
API_VERSION = "2021-08-06"  # the Blob REST version plain GETs ask for
PUT_BLOCK = 16 << 20  # uploads above PUT_SINGLE go up as blocks of this size, committed at once
PUT_SINGLE = 64 << 20
_DOMAINS = (".blob.core.windows.net", ".dfs.core.windows.net")


def from_az_url(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """`az://container/key` or `az://container@account.../key`."""
    container, _, host = netloc.partition("@")
    if not container:
        raise StorageError(f"az://{netloc}{path}: an Azure URL needs a container (az://c/key)")
    account = host.split(".", 1)[0] or None
    return AzureBackend(container, account, **options), path.lstrip("/")


def from_abfs_url(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """`abfs://container@account.dfs.core.windows.net/key` (the form Spark and fsspec use)."""
    return from_az_url(netloc, path, options)


def from_https_url(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """`https://account.blob.core.windows.net/container/key`."""
    container, _, key = path.lstrip("/").partition("/")
    if not container:
        raise StorageError(f"https://{netloc}{path}: the URL needs a container after the host")
    return AzureBackend(container, netloc.split(".", 1)[0], **options), key


def is_azure_host(netloc: str) -> bool:
    """Whether an https:// host is an Azure storage account endpoint."""
    return netloc.lower().endswith(_DOMAINS)


@dataclass(frozen=True)
class _Account:
    """One process's clients for one storage account: the SDK service client (metadata,
    listing, uploads, deletes) and what plain GETs of blob bytes need: the account's blob
    endpoint, an HTTP session, and one of key / SAS / token credential (none: anonymous)."""

    service: Any
    session: Any
    endpoint: str
    name: str
    key: str | None
    sas: str | None
    token_credential: Any

    @property
    def anonymous(self) -> bool:
        return not (self.key or self.sas or self.token_credential)


_clients: PerProcess[_Account] = PerProcess()


def _env(names: tuple[str, ...]) -> str | None:
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def _get_account(account: str | None, connect: float, read: float) -> _Account:
    """This process's clients for `account` and timeouts, created on first use."""
    key = (account, connect, read, tuple(os.environ.get(k) for k in _CLIENT_ENV))
    return _clients.get(key, lambda: _new_account(account, connect, read))


def _parse_connection_string(text: str) -> dict[str, str]:
    pairs = (part.split("=", 1) for part in text.split(";") if "=" in part)
    return {k.strip(): v.strip() for k, v in pairs}


def _new_account(account: str | None, connect: float, read: float) -> _Account:
    blob = require("azure.storage.blob", feature="Azure URLs", extra="azure",
                   package="azure-storage-blob")
    import requests
    from requests.adapters import HTTPAdapter

    settings = dict(
        retry_total=0, connection_timeout=connect, read_timeout=read,
        max_single_put_size=PUT_SINGLE, max_block_size=PUT_BLOCK,
    )
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=32, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    parts = _parse_connection_string(os.environ.get(CONNECTION_STRING_ENV) or "")
    if parts and account in (None, parts.get("AccountName")):
        name = parts.get("AccountName") or ""
        endpoint = parts.get("BlobEndpoint") or (
            f"{parts.get('DefaultEndpointsProtocol', 'https')}://{name}.blob."
            f"{parts.get('EndpointSuffix', 'core.windows.net')}")
        service = blob.BlobServiceClient.from_connection_string(
            os.environ[CONNECTION_STRING_ENV], **settings)
        return _Account(service, session, endpoint.rstrip("/"), name, parts.get("AccountKey"),
                        parts.get("SharedAccessSignature"), None)
    name = account or _env(ACCOUNT_ENV)
    if not name:
        raise AccessDeniedError(f"no Azure storage account named: {_HOW_TO_AUTH}")
    endpoint = f"https://{name}.blob.core.windows.net"
    key, sas = _env(KEY_ENV), (os.environ.get(SAS_ENV) or "").lstrip("?") or None
    token = None if key or sas else _default_credential()
    credential: Any = {"account_name": name, "account_key": key} if key else sas or token
    service = blob.BlobServiceClient(endpoint, credential=credential, **settings)
    return _Account(service, session, endpoint, name, key, sas, token)


def _default_credential() -> Any:
    """DefaultAzureCredential when azure-identity is installed, else None (anonymous)."""
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        return None
    return DefaultAzureCredential()


def _read_auth(account: _Account, container: str, path: str) -> tuple[str, dict[str, str]]:
    """The query string and headers that let a plain GET read one blob."""
    headers = {"x-ms-version": API_VERSION}
    if account.sas:
        return account.sas, headers
    if account.key:
        from azure.storage.blob import BlobSasPermissions, generate_blob_sas

        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        return generate_blob_sas(account.name, container, path, account_key=account.key,
                                 permission=BlobSasPermissions(read=True), expiry=expiry), headers
    if account.token_credential is not None:
        token = account.token_credential.get_token("https://storage.azure.com/.default").token
        headers["Authorization"] = f"Bearer {token}"
    return "", headers


@dataclass(frozen=True)
class AzureBackend(Backend):
    """One container; paths are blob names. Picklable: holds settings only."""

    container: str
    account: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = TIMEOUT

    parallel_ranges = True
    conditional_reads = True

    def url(self, path: str) -> str:
        where = f"{self.container}@{self.account}" if self.account else self.container
        return f"az://{where}/{path}"

    @property
    def _account(self) -> _Account:
        return _get_account(self.account, self.connect_timeout, self.read_timeout)

    @property
    def _container(self) -> Any:
        return self._account.service.get_container_client(self.container)

    def _blob(self, path: str) -> Any:
        return self._container.get_blob_client(path)

    def _where(self) -> str:
        with contextlib.suppress(Exception):
            return self._account.endpoint
        return "the Azure endpoint"

    def _error(self, exc: Exception, path: str) -> StorageError:
        """Map an azure-core failure to a typed error naming the blob."""
        from azure.core import exceptions as ax

        url, where = self.url(path), self._where()
        status = getattr(exc, "status_code", None)
        code = _code(exc)

        if isinstance(exc, ax.ResourceNotFoundError) or status == 404:
            if code == _MISSING_CONTAINER or (not code and not self._container_exists()):
                return ObjectNotFoundError(
                    f"{url}: container {self.container!r} does not exist at {where}"
                )
            return ObjectNotFoundError(f"{url}: no such object")
        if status == 412:
            return ObjectChangedError(f"{url}: the blob changed since its version was recorded "
                                      "(its ETag is another)")
        if status in (401, 403) or code in _ACCESS_CODES:
            if status is None or self._anonymous():
                return AccessDeniedError(f"{url}: {_HOW_TO_AUTH} ({exc})")
            return AccessDeniedError(
                f"{url}: access denied ({code or status}); check the key, SAS token or role"
            )
        if isinstance(exc, ax.ClientAuthenticationError):  # a credential could not get a token
            return AccessDeniedError(f"{url}: {_HOW_TO_AUTH} ({exc})")
        if (bad := untrusted(exc)) is not None:
            return untrusted_error(url, where, bad, REQUESTS_SETTING)
        if _unreachable(exc):
            return StorageError(f"{url}: cannot reach the Azure endpoint {where}: {exc}")
        if _timed_out(exc):
            return DownloadTimeoutError(f"{url}: timed out talking to {where}: {exc}")
        if isinstance(exc, (ax.HttpResponseError, _ResponseError)) and status is not None:
            headers = getattr(getattr(exc, "response", None), "headers", None) or {}
            return status_error(f"{url}: Azure error {code or status}: {exc.reason}", status,
                                headers.get("Retry-After"))
        return StorageError(f"{url}: transfer from {where} failed: {exc!r}")

    def _anonymous(self) -> bool:
        with contextlib.suppress(Exception):
            return self._account.anonymous
        return False

    def _container_exists(self) -> bool:
        try:
            return bool(self._container.exists())
        except Exception:
            return True  # cannot tell: report the blob as missing

    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        return self._chunks(path, start, end, None)

    def iter_chunks_if(self, path: str, start: int | None, end: int | None, if_match: str, *,
                       deadline: float | None = None) -> Iterator[bytes]:
        return self._chunks(path, start, end, if_match)

    def _chunks(self, path: str, start: int | None, end: int | None, if_match: str | None
                ) -> Iterator[bytes]:
        # A plain streamed GET: the SDK's downloader buffers each piece whole and retries a
        # broken body by itself (with sleeps), which would break deadlines and double retries.
        with self._translated(path):
            account = self._account
            query, headers = _read_auth(account, self.container, path)
            if start is not None or end is not None:
                headers["Range"] = f"bytes={start or 0}-{'' if end is None else end - 1}"
            if if_match is not None:
                headers["If-Match"] = if_match
            blob_url = f"{account.endpoint}/{quote(self.container)}/{quote(path)}"
            response = account.session.get(
                f"{blob_url}?{query}" if query else blob_url, headers=headers, stream=True,
                timeout=(self.connect_timeout, self.read_timeout),
            )
            try:
                if response.status_code not in (200, 206):
                    raise _ResponseError(response)
                yield from response.iter_content(CHUNK)
            finally:
                response.close()

    def size(self, path: str) -> int:
        return self.version(path).size

    def version(self, path: str) -> ListedObject:
        with self._translated(path):
            properties = self._blob(path).get_blob_properties()
        return ListedObject(int(properties.size), properties.etag or None)

    def put(self, path: str, data: bytes) -> None:
        with self._translated(path):
            self._blob(path).upload_blob(data, overwrite=True)

    def upload(self, local: Path, path: str) -> None:
        if not os.path.isfile(local):
            raise ObjectNotFoundError(f"{local}: no such file to upload to {self.url(path)}")
        with self._translated(path), open(local, "rb") as source:
            self._blob(path).upload_blob(source, overwrite=True, max_concurrency=4,
                                         length=os.fstat(source.fileno()).st_size)

    def list(self, prefix: str) -> list[str]:
        with self._translated(prefix):
            return sorted(self._container.list_blob_names(name_starts_with=prefix or None))

    def list_sizes(self, prefix: str) -> dict[str, int]:
        return {path: listed.size for path, listed in self.list_versions(prefix).items()}

    def list_versions(self, prefix: str) -> dict[str, ListedObject]:
        with self._translated(prefix):
            blobs = self._container.list_blobs(name_starts_with=prefix or None)
            return dict(sorted((blob.name, ListedObject(int(blob.size), blob.etag or None))
                               for blob in blobs))

    def delete(self, path: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        with self._translated(path):
            try:
                self._blob(path).delete_blob()
            except ResourceNotFoundError as exc:
                if _code(exc) == _MISSING_CONTAINER:
                    raise


def _code(exc: Exception) -> str:
    """The storage error code of an azure-core error ("BlobNotFound"), or ""."""
    code = getattr(exc, "error_code", None)
    return str(getattr(code, "value", code) or "")


class _ResponseError(Exception):
    """A plain GET answered with an error status (carries the status and Azure's error code)."""

    def __init__(self, response: Any) -> None:
        self.status_code = int(response.status_code)
        self.error_code = response.headers.get("x-ms-error-code") or ""
        self.reason = response.reason or ""
        self.response = response
        super().__init__(f"HTTP {self.status_code} {self.error_code} {self.reason}")


def _unreachable(exc: Exception) -> bool:
    """Whether no connection could be opened (SDK or plain GET)."""
    import requests
    import urllib3
    from azure.core.exceptions import ServiceRequestError, ServiceRequestTimeoutError

    if isinstance(exc, ServiceRequestError) and not isinstance(exc, ServiceRequestTimeoutError):
        return True
    inner = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else None
    return isinstance(getattr(inner, "reason", inner), urllib3.exceptions.NewConnectionError)


def _timed_out(exc: Exception) -> bool:
    import requests
    import urllib3
    from azure.core.exceptions import ServiceRequestTimeoutError, ServiceResponseTimeoutError

    if isinstance(exc, (ServiceRequestTimeoutError, ServiceResponseTimeoutError, TimeoutError,
                        requests.Timeout)):
        return True
    inner = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else None
    return isinstance(getattr(inner, "reason", inner), urllib3.exceptions.TimeoutError)
