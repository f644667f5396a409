"""A loopback moto S3 server behind the test suite's fault proxy, which answers every request
after a delay (a store's time to first byte, which loopback does not have), for the start-up
benchmarks: a client to fill the bucket directly, and the environment a child process needs
to reach the bucket through the proxy."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BUCKET = "bench"


@contextmanager
def delayed_s3(delay: float, lifetime: float = 7200.0) -> Iterator[tuple[Any, dict[str, str]]]:
    """(boto3 client of the server, environment of a child that reads through the proxy);
    the bucket BUCKET exists.

    Args:
        delay: seconds the proxy waits before answering each request.
        lifetime: seconds the proxy serves at most.
    """
    from tests.support.faultproxy import FaultProxy
    from tests.support.s3server import start_s3_server

    server = start_s3_server()
    proxy = None
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        proxy = FaultProxy(server.endpoint, delay=delay, lifetime=lifetime)
        yield client, {**os.environ, **server.env(), "S3_ENDPOINT_URL": proxy.endpoint,
                       "PYTHONPATH": str(REPO)}
    finally:
        if proxy is not None:
            proxy.close()
        server.stop()
