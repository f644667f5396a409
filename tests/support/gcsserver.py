"""A real GCS emulator for tests: gcp-storage-emulator in its own process on loopback.

Chosen over fake-gcs-server because it is a pure-Python wheel already in the test extra, speaks
the JSON API paths google-cloud-storage uses (metadata, media download with Range, multipart and
resumable uploads, listing with prefixes) and answers 404 for a missing bucket as GCS does.
Use from any test folder:  from tests.support.gcsserver import gcs_server  # noqa: F401
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import answers_http, die_with_parent, free_port, stop_process

START_TIMEOUT = 30.0


class GCSServer:
    """A running emulator: endpoint URL, environment for the library, bucket helpers."""

    def __init__(self, process: subprocess.Popen, endpoint: str, log: Path) -> None:
        self.process, self.endpoint, self.log = process, endpoint, log

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """Point google-cloud-storage (and this library) at the emulator, or at `endpoint`."""
        return {"STORAGE_EMULATOR_HOST": endpoint or self.endpoint,
                "GOOGLE_CLOUD_PROJECT": "test", "NO_PROXY": "127.0.0.1"}

    def client(self):
        """A google-cloud-storage client for the emulator (anonymous, no retries needed)."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.endpoint})

    def make_bucket(self, name: str | None = None) -> str:
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(name)
        return name

    def stop(self) -> None:
        stop_process(self.process, self.log)


def start_gcs_server(timeout: float = START_TIMEOUT) -> GCSServer:
    """Start the emulator (in memory) on a free loopback port and wait until it answers."""
    last = ""
    for _ in range(3):
        port = free_port()
        fd, log = tempfile.mkstemp(prefix="gcs-emulator-", suffix=".log")
        with os.fdopen(fd, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                 "--port", str(port), "--in-memory"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=tempfile.gettempdir(), preexec_fn=die_with_parent,
            )
        server = GCSServer(process, f"http://127.0.0.1:{port}", Path(log))
        if answers_http(server.process, f"{server.endpoint}/", time.monotonic() + timeout):
            return server
        last = Path(log).read_text(errors="replace")[-2000:]
        server.stop()
    raise RuntimeError(f"gcp-storage-emulator did not come up within {timeout}s:\n{last}")


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GCSServer]:
    """One emulator process for the whole test session."""
    server = start_gcs_server()
    try:
        yield server
    finally:
        server.stop()
