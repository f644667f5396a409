"""One face for every object store the backend suite runs against: a fresh bucket (container,
folder), URLs into it (optionally through a fault proxy), the environment that points this
library at the server, and raw writes/reads through the store's own client (never through the
backend under test)."""

from __future__ import annotations

import abc
import os
import uuid
from pathlib import Path

from tests.support.azurite import AzuriteServer
from tests.support.faultproxy import FaultProxy
from tests.support.gcsserver import GCSServer
from tests.support.httpserver import HTTPFileServer
from tests.support.s3server import S3Server


class Store(abc.ABC):
    """A running server of one kind and how to use it."""

    kind: str
    writable = True  # whether MDSWriter / convert / merge-index can publish to it
    has_buckets = True  # whether a URL names a bucket or container that can be missing

    def __init__(self, server: S3Server | GCSServer | AzuriteServer | HTTPFileServer) -> None:
        self.server = server

    @property
    def upstream(self) -> str:
        """The server's endpoint (what a FaultProxy forwards to)."""
        return self.server.endpoint

    @abc.abstractmethod
    def space(self) -> str:
        """A fresh, empty bucket (container, folder) name."""

    @abc.abstractmethod
    def url(self, space: str, key: str = "", via: FaultProxy | None = None) -> str:
        """The URL of `key` in `space`, reached through `via` when given."""

    @abc.abstractmethod
    def env(self, via: FaultProxy | None = None) -> dict[str, str]:
        """Environment pointing this library at the server (or at `via` in front of it)."""

    @abc.abstractmethod
    def put(self, space: str, key: str, data: bytes) -> None:
        """Store an object with the server's own client."""

    @abc.abstractmethod
    def read_dir(self, space: str, prefix: str) -> dict[str, bytes]:
        """Every object under `prefix/` as {name relative to the prefix: bytes}."""

    def put_dir(self, space: str, prefix: str, folder: Path, skip: tuple[str, ...] = ()) -> None:
        """Upload every file of `folder` under `prefix/` (except the names in `skip`)."""
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name not in skip:
                self.put(space, f"{prefix}/{path.relative_to(folder).as_posix()}",
                         path.read_bytes())

    def request_path(self, space: str, key: str) -> str:
        """The HTTP path of a GET of this object, as the fault proxy sees it."""
        return f"/{space}/{key}"


class S3Store(Store):
    kind = "s3"
    server: S3Server

    def __init__(self, server: S3Server) -> None:
        super().__init__(server)
        self.client = server.client()

    def space(self) -> str:
        return self.server.make_bucket()

    def url(self, space: str, key: str = "", via: FaultProxy | None = None) -> str:
        return f"s3://{space}/{key}"

    def env(self, via: FaultProxy | None = None) -> dict[str, str]:
        return {**self.server.env(), **({"S3_ENDPOINT_URL": via.endpoint} if via else {})}

    def put(self, space: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=space, Key=key, Body=data)

    def read_dir(self, space: str, prefix: str) -> dict[str, bytes]:
        client = self.client
        listed = client.list_objects_v2(Bucket=space, Prefix=prefix + "/").get("Contents", [])
        return {item["Key"][len(prefix) + 1:]:
                client.get_object(Bucket=space, Key=item["Key"])["Body"].read()
                for item in listed}


class GCSStore(Store):
    kind = "gcs"
    server: GCSServer

    def __init__(self, server: GCSServer) -> None:
        super().__init__(server)
        self.client = server.client()

    def space(self) -> str:
        return self.server.make_bucket()

    def url(self, space: str, key: str = "", via: FaultProxy | None = None) -> str:
        return f"gs://{space}/{key}"

    def env(self, via: FaultProxy | None = None) -> dict[str, str]:
        return self.server.env(via.endpoint if via else None)

    def put(self, space: str, key: str, data: bytes) -> None:
        self.client.bucket(space).blob(key).upload_from_string(data)

    def read_dir(self, space: str, prefix: str) -> dict[str, bytes]:
        blobs = self.client.list_blobs(space, prefix=prefix + "/")
        return {blob.name[len(prefix) + 1:]: blob.download_as_bytes() for blob in blobs}

    def request_path(self, space: str, key: str) -> str:
        return f"/download/storage/v1/b/{space}/o/{key.replace('/', '%2F')}"


class AzureStore(Store):
    kind = "azure"
    server: AzuriteServer

    def __init__(self, server: AzuriteServer) -> None:
        super().__init__(server)
        self.service = server.service()

    def space(self) -> str:
        return self.server.make_container()

    def url(self, space: str, key: str = "", via: FaultProxy | None = None) -> str:
        return f"az://{space}/{key}"

    def env(self, via: FaultProxy | None = None) -> dict[str, str]:
        return self.server.env(via.endpoint if via else None)

    def put(self, space: str, key: str, data: bytes) -> None:
        self.service.get_blob_client(space, key).upload_blob(data, overwrite=True)

    def read_dir(self, space: str, prefix: str) -> dict[str, bytes]:
        container = self.service.get_container_client(space)
        return {name[len(prefix) + 1:]: container.download_blob(name).readall()
                for name in container.list_blob_names(name_starts_with=prefix + "/")}

    def request_path(self, space: str, key: str) -> str:
        return f"/devstoreaccount1/{space}/{key}"


class HTTPStore(Store):
    kind = "http"
    writable = False
    has_buckets = False
    server: HTTPFileServer

    def space(self) -> str:
        name = f"test-{uuid.uuid4().hex[:12]}"
        (self.server.root / name).mkdir()
        return name

    def url(self, space: str, key: str = "", via: FaultProxy | None = None) -> str:
        return f"{(via or self.server).endpoint}/{space}/{key}"

    def env(self, via: FaultProxy | None = None) -> dict[str, str]:
        return {"NO_PROXY": "127.0.0.1"}

    def put(self, space: str, key: str, data: bytes) -> None:
        path = self.server.root / space / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def read_dir(self, space: str, prefix: str) -> dict[str, bytes]:
        folder = self.server.root / space / prefix
        return {p.relative_to(folder).as_posix(): p.read_bytes()
                for p in sorted(folder.rglob("*")) if p.is_file()}
