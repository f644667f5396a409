"""An S3 store that does not answer: the message names what the request went to (the endpoint
and the setting that chose it, or AWS itself) once, and what to check or set."""

from __future__ import annotations

import re

import pytest

from streaming.errors import StorageError
from streaming.storage import fetch
from tests.support.processes import free_port

_ENDPOINT_VARS = ("S3_ENDPOINT_URL", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "HTTPS_PROXY",
                  "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "AWS_PROFILE")


@pytest.fixture
def clean_env(monkeypatch):
    for name in _ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return monkeypatch


def _failure(tmp_path) -> str:
    with pytest.raises(StorageError) as info:
        fetch("s3://bucket/data/index.json", tmp_path / "index.json", timeout=2.0, retry=0,
              backoff=0.1)
    message = str(info.value)
    assert not re.search(r"\b(\w+ \w+) the \1\b", message), message  # "the X the X"
    assert "the S3 endpoint the" not in message
    return message


def test_an_endpoint_from_s3_endpoint_url_is_named_with_its_setting(clean_env, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    clean_env.setenv("S3_ENDPOINT_URL", dead)
    message = _failure(tmp_path)
    assert f"cannot reach the S3 endpoint {dead} (from S3_ENDPOINT_URL)" in message
    assert "s3://bucket/data/index.json" in message and "server is up" in message


def test_an_endpoint_from_aws_endpoint_url_is_named_with_its_setting(clean_env, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    clean_env.setenv("AWS_ENDPOINT_URL", dead)
    assert f"the S3 endpoint {dead} (from AWS_ENDPOINT_URL)" in _failure(tmp_path)


def test_aws_itself_unreachable_says_how_to_name_another_endpoint(clean_env, tmp_path):
    """No endpoint set: the requests go to AWS (here through a proxy that is not there, so
    nothing leaves the machine), and the message says how to point them elsewhere."""
    clean_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{free_port()}")
    message = _failure(tmp_path)
    assert "cannot reach AWS S3" in message
    assert "S3_ENDPOINT_URL" in message and "AWS_ENDPOINT_URL" in message
