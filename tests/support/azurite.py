"""A real Azure Blob Storage emulator for tests: Azurite (npm package, installed into the repo's
.node/ folder by `make test`) in its own process on loopback, telemetry off.

Use from any test folder:  from tests.support.azurite import azurite_server  # noqa: F401
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import die_with_parent, free_port, stop_process

REPO = Path(__file__).resolve().parents[2]
AZURITE = REPO / ".node" / "node_modules" / ".bin" / "azurite-blob"
START_TIMEOUT = 30.0
ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and key
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")


def connection_string(endpoint: str, key: str = KEY) -> str:
    """The development account's connection string for a blob endpoint such as a proxy."""
    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
            f"BlobEndpoint={endpoint}/{ACCOUNT};")


class AzuriteServer:
    """A running Azurite blob service: endpoint, environment for the library, containers."""

    def __init__(self, process: subprocess.Popen, endpoint: str, log: Path, folder: str) -> None:
        self.process, self.endpoint, self.log, self.folder = process, endpoint, log, folder

    def env(self, endpoint: str | None = None, key: str = KEY) -> dict[str, str]:
        """Point azure-storage-blob (and this library) at Azurite, or at `endpoint` before it."""
        return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(endpoint or self.endpoint,
                                                                     key),
                "NO_PROXY": "127.0.0.1"}

    def service(self):
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(connection_string(self.endpoint))

    def make_container(self, name: str | None = None) -> str:
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.service().create_container(name)
        return name

    def stop(self) -> None:
        stop_process(self.process, self.log)
        shutil.rmtree(self.folder, ignore_errors=True)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_azurite(timeout: float = START_TIMEOUT,
                  tls: tuple[Path, Path] | None = None) -> AzuriteServer:
    """Start Azurite's blob service in memory on a free loopback port; wait until it listens.
    With `tls` (a PEM certificate and its key), it serves HTTPS."""
    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run `make azurite` (part of `make test`)")
    last = ""
    for _ in range(3):
        port = free_port()
        folder = tempfile.mkdtemp(prefix="azurite-")
        log = Path(folder, "azurite.log")
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                 "--inMemoryPersistence", "--skipApiVersionCheck", "--loose",
                 "--disableTelemetry",
                 *(["--cert", str(tls[0]), "--key", str(tls[1])] if tls else [])],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=folder,
                preexec_fn=die_with_parent,
            )
        scheme = "https" if tls else "http"
        server = AzuriteServer(process, f"{scheme}://127.0.0.1:{port}", log, folder)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None and not _listening(port):
            time.sleep(0.1)
        if process.poll() is None and _listening(port):
            return server
        last = log.read_text(errors="replace")[-2000:]
        server.stop()
    raise RuntimeError(f"Azurite did not come up within {timeout}s:\n{last}")


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[AzuriteServer]:
    """One Azurite process for the whole test session."""
    server = start_azurite()
    try:
        yield server
    finally:
        server.stop()

