"""A real S3-compatible HTTP server for tests: moto's standalone server in its own process.

Use from any test folder by importing the fixtures in that folder's conftest.py:
    from tests.support.s3server import s3_env, s3_server  # noqa: F401
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import OPENER, answers_http, die_with_parent, free_port, stop_process

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
START_TIMEOUT = 30.0


class S3Server:
    """A running moto server: endpoint URL, boto3 client factory, bucket helper."""

    def __init__(self, process: subprocess.Popen, endpoint: str, log: Path) -> None:
        self.process = process
        self.endpoint = endpoint
        self.log = log
        self.credentials = dict(FAKE_CREDENTIALS)

    def env(self) -> dict[str, str]:
        """Environment that points this library (and boto3) at the server."""
        return {**self.credentials, "S3_ENDPOINT_URL": self.endpoint, "NO_PROXY": "127.0.0.1"}

    def client(self, **credentials: str) -> Any:
        """A boto3 S3 client for the server (fake credentials unless given)."""
        import boto3
        from botocore.config import Config

        creds = {
            "aws_access_key_id": self.credentials["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": self.credentials["AWS_SECRET_ACCESS_KEY"],
            **credentials,
        }
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.credentials["AWS_DEFAULT_REGION"],
            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
            **creds,
        )

    def make_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name if none is given) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def reset(self) -> None:
        """Drop every bucket and object on the server."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        OPENER.open(request, timeout=10).close()

    def log_tail(self, limit: int = 2000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-limit:]
        return ""

    def stop(self) -> None:
        """Terminate the server process (kill it if it does not exit in 5 s)."""
        stop_process(self.process, self.log)


def start_s3_server(
    *, env: dict[str, str] | None = None, timeout: float = START_TIMEOUT
) -> S3Server:
    """Start `python -m moto.server` on a free loopback port and wait until it answers."""
    last = ""
    for _ in range(3):  # the free port can be taken between probe and bind: try another
        port = free_port()
        fd, log = tempfile.mkstemp(prefix="moto-", suffix=".log")
        with os.fdopen(fd, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **FAKE_CREDENTIALS, **(env or {})},
                preexec_fn=die_with_parent,
            )
        server = S3Server(process, f"http://127.0.0.1:{port}", Path(log))
        if answers_http(server.process, f"{server.endpoint}/moto-api/",
                          time.monotonic() + timeout):
            return server
        last = server.log_tail()
        server.stop()
    raise RuntimeError(f"moto server did not come up within {timeout}s:\n{last}")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto server process for the whole test session."""
    server = start_s3_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """Point AWS credentials and S3_ENDPOINT_URL at the test server for one test."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    return s3_server
