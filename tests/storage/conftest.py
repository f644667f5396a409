"""Storage tests talk to a real moto server process, optionally through the fault proxy."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.faultproxy import fault_proxy  # noqa: F401
from tests.support.s3server import s3_env, s3_server  # noqa: F401


@pytest.fixture
def random_objects(s3_env):  # noqa: F811 (the fixture imported above)
    """Factory: `random_objects(count, size, suffix)` -> (bucket, {key: bytes}), a new bucket
    holding `count` objects of random bytes named shard.NNNNN<suffix>, of `size + 1000 * i`
    bytes each."""

    def make(count: int, size: int, suffix: str) -> tuple[str, dict[str, bytes]]:
        bucket = s3_env.make_bucket()
        client = s3_env.client()
        blobs = {f"shard.{i:05}{suffix}": os.urandom(size + i * 1000) for i in range(count)}
        for key, data in blobs.items():
            client.put_object(Bucket=bucket, Key=key, Body=data)
        return bucket, blobs

    return make


@pytest.fixture
def certificate(tmp_path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    return cert, key
