"""Amazon S3 and S3-compatible services (MinIO, R2, Ceph, moto...) through boto3.

Credentials come from the usual AWS chain (env, profiles, instance roles). `S3_ENDPOINT_URL`
points at an S3-compatible service. botocore's own retries are off: `transfer.py` owns retrying.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    ObjectChangedError,
    ObjectNotFoundError,
    StorageError,
)
from streaming.storage.backend import CHUNK, Backend, ListedObject
from streaming.storage.per_process import PerProcess
from streaming.storage.retry import CONNECT_TIMEOUT, TIMEOUT, status_error
from streaming.storage.s3_endpoint import ENDPOINT_ENV, unreachable
from streaming.storage.s3_quick import quick_stream
from streaming.storage.tls_trust import S3_SETTING, untrusted, untrusted_error

# Env settings that change which credentials a new client picks up (part of the client cache key).
_CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_DEFAULT_REGION", "AWS_REGION",
)
_ACCESS_CODES = {
    "403", "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch",
    "ExpiredToken", "InvalidToken", "AccountProblem",
}
_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}
_HOW_TO_AUTH = (
    "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
    "with ~/.aws/credentials, or run where an instance/role provides them"
)
MULTIPART_THRESHOLD = 64 << 20  # upload() switches to multipart at this size
MULTIPART_CHUNK = 16 << 20

# One client per process and settings: boto3 clients are thread-safe but not fork-safe.
_clients: PerProcess[Any] = PerProcess()


def _client(endpoint: str | None, region: str | None, connect: float, read: float) -> Any:
    """This process's boto3 S3 client for the given settings, created on first use."""
    key = (endpoint, region, connect, read, tuple(os.environ.get(k) for k in _CREDENTIAL_ENV))
    return _clients.get(key, lambda: _new_client(endpoint, region, connect, read))


def _new_client(endpoint: str | None, region: str | None, connect: float, read: float) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=connect,
        read_timeout=read,
        retries={"total_max_attempts": 1, "mode": "standard"},
        max_pool_connections=32,
        s3={"addressing_style": "path"} if endpoint else None,
    )
    session = boto3.session.Session(botocore_session=_botocore_session())  # one per client
    return session.client("s3", endpoint_url=endpoint, region_name=region, config=config)


_loader: Any = None  # botocore's model loader (set while _clients holds its lock)


def _botocore_session() -> Any:
    """A new botocore session (they are not thread-safe) sharing one model loader: parsing
    botocore's JSON models is most of a client's start-up, and a forked DataLoader worker
    inherits the parsed models, so its own client is cheap to make."""
    import botocore.session

    global _loader
    core = botocore.session.Session()
    if _loader is None:
        _loader = core.get_component("data_loader")
    else:
        core.register_component("data_loader", _loader)
    return core


@dataclass(frozen=True)
class S3Backend(Backend):
    """One bucket; paths are keys. Picklable: holds settings only, clients live per process."""

    bucket: str
    endpoint_url: str | None = field(default_factory=lambda: os.environ.get(ENDPOINT_ENV) or None)
    region: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = TIMEOUT

    parallel_ranges = True
    conditional_reads = True

    @property
    def client(self) -> Any:
        return _client(self.endpoint_url, self.region, self.connect_timeout, self.read_timeout)

    def url(self, path: str) -> str:
        return f"s3://{self.bucket}/{path}"

    def _error(self, exc: Exception, path: str) -> StorageError:
        """Map a boto3 / botocore / socket failure to a typed error naming the object."""
        from botocore import exceptions as bx

        url = self.url(path)
        where = self.endpoint_url or "the AWS S3 endpoint"
        cause = exc.__context__ if type(exc).__name__ == "S3UploadFailedError" else exc
        if (bad := untrusted(exc)) is not None:
            return untrusted_error(url, where, bad, S3_SETTING)
        if isinstance(cause, bx.ClientError):
            err = cause.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "NoSuchBucket":
                return ObjectNotFoundError(self._no_bucket(path))
            if code == "PreconditionFailed" or status == 412:
                return ObjectChangedError(f"{url}: the object changed since its version was "
                                          "recorded (its ETag is another)")
            if code in _MISSING_CODES or status == 404:
                return ObjectNotFoundError(f"{url}: no such object")
            if code in _ACCESS_CODES or status == 403:
                return AccessDeniedError(
                    f"{url}: access denied ({code}); check the credentials and the bucket policy"
                )
            headers = cause.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            return status_error(f"{url}: S3 error {code or status}: {err.get('Message', '')}",
                                status, headers.get("retry-after"))
        if isinstance(cause, (bx.NoCredentialsError, bx.PartialCredentialsError)):
            return AccessDeniedError(f"{url}: {_HOW_TO_AUTH}")
        if isinstance(cause, (bx.ReadTimeoutError, bx.ConnectTimeoutError, TimeoutError)):
            return DownloadTimeoutError(f"{url}: timed out talking to {where}: {cause}")
        if isinstance(cause, (bx.EndpointConnectionError, bx.ProxyConnectionError)):
            return StorageError(unreachable(url, self.endpoint_url, cause))
        return StorageError(f"{url}: transfer from {where} failed: {cause!r}")

    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        return self._chunks(path, start, end, deadline, None)

    def iter_chunks_if(self, path: str, start: int | None, end: int | None, if_match: str, *,
                       deadline: float | None = None) -> Iterator[bytes]:
        return self._chunks(path, start, end, deadline, if_match)

    def _chunks(self, path: str, start: int | None, end: int | None, deadline: float | None,
                if_match: str | None) -> Iterator[bytes]:
        quick = quick_stream(self.bucket, path, self.endpoint_url, self.region,
                             connect_timeout=min(self.read_timeout, self.connect_timeout),
                             read_timeout=self.read_timeout, start=start, end=end, chunk=CHUNK,
                             deadline=deadline, if_match=if_match)
        if quick is not None:  # no boto3 client needed (s3_quick)
            yield from quick
            return
        request: dict[str, Any] = {"Bucket": self.bucket, "Key": path}
        if start is not None or end is not None:
            last = "" if end is None else str(end - 1)
            request["Range"] = f"bytes={start or 0}-{last}"
        if if_match is not None:
            request["IfMatch"] = if_match
        with self._translated(path):
            body = self.client.get_object(**request)["Body"]
            try:
                yield from body.iter_chunks(CHUNK)
            finally:
                body.close()

    def size(self, path: str) -> int:
        return self.version(path).size

    def version(self, path: str) -> ListedObject:
        try:
            with self._translated(path):
                head = self.client.head_object(Bucket=self.bucket, Key=path)
        except ObjectNotFoundError:
            self._check_bucket(path)  # HEAD cannot tell a missing key from a missing bucket
            raise
        return ListedObject(int(head["ContentLength"]), head.get("ETag"))

    def _check_bucket(self, path: str) -> None:
        try:
            with self._translated(path):
                self.client.head_bucket(Bucket=self.bucket)
        except ObjectNotFoundError as exc:
            raise ObjectNotFoundError(self._no_bucket(path)) from exc

    def _no_bucket(self, path: str) -> str:
        where = self.endpoint_url or "the AWS S3 endpoint"
        return f"{self.url(path)}: bucket {self.bucket!r} does not exist at {where}"

    def put(self, path: str, data: bytes) -> None:
        with self._translated(path):
            self.client.put_object(Bucket=self.bucket, Key=path, Body=data)

    def upload(self, local: Path, path: str) -> None:
        if not os.path.isfile(local):
            raise ObjectNotFoundError(f"{local}: no such file to upload to {self.url(path)}")
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_CHUNK,
            max_concurrency=8,
        )
        with self._translated(path):
            self.client.upload_file(str(local), self.bucket, path, Config=config)

    def list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        with self._translated(prefix):
            pages = self.client.get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
                keys.extend(item["Key"] for item in page.get("Contents", ()))
        return sorted(keys)

    def list_sizes(self, prefix: str) -> dict[str, int]:
        return {path: listed.size for path, listed in self.list_versions(prefix).items()}

    def list_versions(self, prefix: str) -> dict[str, ListedObject]:
        found: dict[str, ListedObject] = {}
        with self._translated(prefix):
            pages = self.client.get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
                found.update((item["Key"], ListedObject(int(item["Size"]), item.get("ETag")))
                             for item in page.get("Contents", ()))
        return dict(sorted(found.items()))

    def delete(self, path: str) -> None:
        with self._translated(path):
            self.client.delete_object(Bucket=self.bucket, Key=path)
