"""The object stores benchmarks/remote.py can run against, each a real server on loopback:
S3 (moto), GCS (gcp-storage-emulator), Azure Blob (Azurite) and plain HTTP (a Range-honouring
file server in its own process). Each target uploads a folder with its own client, names the
dataset URL our library reads, and fetches byte ranges with its own client for the ceiling."""

from __future__ import annotations

import abc
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

from tests.support.processes import die_with_parent, free_port

BUCKET = "bench"
ROOT = Path(__file__).resolve().parent.parent


class Target(abc.ABC):
    """One running store: `env` points this library (and child processes) at it."""

    name: str
    env: dict[str, str]
    pid: int | None  # the server process (its CPU time is reported), None when unknown

    @abc.abstractmethod
    def url(self, prefix: str) -> str:
        """The dataset URL of `prefix` in the benchmark bucket."""

    @abc.abstractmethod
    def put(self, path: Path, key: str) -> None:
        """Upload one file with the store's own client."""

    @abc.abstractmethod
    def get_range(self, key: str, lo: int, hi: int) -> int:
        """Fetch bytes [lo, hi] with the store's own client; the count received."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the server."""


class S3Target(Target):
    name = "s3"

    def __init__(self) -> None:
        from tests.support.s3server import start_s3_server

        self.server = start_s3_server()
        self.env, self.pid = self.server.env(), self.server.process.pid
        self.client = self.server.client()
        self.client.create_bucket(Bucket=BUCKET)

    def url(self, prefix: str) -> str:
        return f"s3://{BUCKET}/{prefix}"

    def put(self, path: Path, key: str) -> None:
        self.client.upload_file(str(path), BUCKET, key)

    def get_range(self, key: str, lo: int, hi: int) -> int:
        body = self.client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={lo}-{hi}")["Body"]
        return len(body.read())

    def stop(self) -> None:
        self.server.stop()


class GCSTarget(Target):
    name = "gcs"

    def __init__(self) -> None:
        from tests.support.gcsserver import start_gcs_server

        self.server = start_gcs_server()
        self.env, self.pid = self.server.env(), self.server.process.pid
        self.bucket = self.server.client().create_bucket(BUCKET)
        self._local = threading.local()

    def url(self, prefix: str) -> str:
        return f"gs://{BUCKET}/{prefix}"

    def put(self, path: Path, key: str) -> None:
        self.bucket.blob(key).upload_from_filename(str(path))

    def get_range(self, key: str, lo: int, hi: int) -> int:
        # A plain ranged GET of the JSON API's media endpoint, one kept-alive connection per
        # thread: the client's download_as_bytes is several times slower than the wire.
        conn = getattr(self._local, "conn", None)
        if conn is None:
            host = self.server.endpoint.split("://", 1)[1]
            conn = self._local.conn = http.client.HTTPConnection(host, timeout=60)
        path = f"/download/storage/v1/b/{quote(BUCKET, safe='')}/o/{quote(key, safe='')}"
        conn.request("GET", f"{path}?alt=media", headers={"Range": f"bytes={lo}-{hi}"})
        response = conn.getresponse()
        data = response.read()
        if response.status not in (200, 206):
            raise RuntimeError(f"GET {path}: HTTP {response.status}")
        return len(data)

    def stop(self) -> None:
        self.server.stop()


class AzureTarget(Target):
    name = "azure"

    def __init__(self) -> None:
        from tests.support.azurite import start_azurite

        self.server = start_azurite()
        self.env, self.pid = self.server.env(), self.server.process.pid
        self.container = self.server.service().create_container(BUCKET)

    def url(self, prefix: str) -> str:
        return f"az://{BUCKET}/{prefix}"

    def put(self, path: Path, key: str) -> None:
        with open(path, "rb") as source:
            self.container.upload_blob(key, source, overwrite=True)

    def get_range(self, key: str, lo: int, hi: int) -> int:
        download = self.container.download_blob(key, offset=lo, length=hi - lo + 1,
                                                max_concurrency=1)
        return len(download.readall())

    def stop(self) -> None:
        self.server.stop()


class HTTPTarget(Target):
    name = "http"

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bench-http-"))
        port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.httpserver", str(self.root), str(port)],
            cwd=ROOT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.endpoint, self.env, self.pid = f"http://127.0.0.1:{port}", {}, self.process.pid
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + 30
        while True:
            try:
                opener.open(f"{self.endpoint}/", timeout=1).close()
            except urllib.error.HTTPError:
                break  # answering (404 for the root folder)
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the HTTP file server did not start") from None
                time.sleep(0.05)
        self._local = threading.local()

    def url(self, prefix: str) -> str:
        return f"{self.endpoint}/{BUCKET}/{prefix}"

    def put(self, path: Path, key: str) -> None:
        dest = self.root / BUCKET / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)

    def get_range(self, key: str, lo: int, hi: int) -> int:
        conn = getattr(self._local, "conn", None)  # one kept-alive connection per thread
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self.endpoint[7:], timeout=60)
        conn.request("GET", f"/{BUCKET}/{key}", headers={"Range": f"bytes={lo}-{hi}"})
        return len(conn.getresponse().read())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


TARGETS = {"s3": S3Target, "gcs": GCSTarget, "azure": AzureTarget, "http": HTTPTarget}
