"""The boto3-free GETs of index.json and of shards: the signature is the one botocore computes
for the same request, whole objects and byte ranges arrive exact from a real S3 server, a
server error is raised once (not asked again through boto3), the path steps aside whenever
botocore's configuration could send the request elsewhere, and a start from S3, fresh or warm,
builds no boto3 client at all."""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming.errors import StorageError
from streaming.storage import fetch
from streaming.storage.s3_quick import (
    Credentials,
    quick_stream,
    signed_headers,
    target_for,
)
from writers.mds import MDSWriter

REPO = Path(__file__).resolve().parents[2]
CREDS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None)


def botocore_headers(url: str, region: str, creds: Credentials) -> dict[str, str]:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    request = AWSRequest(method="GET", url=url)
    S3SigV4Auth(BotoCredentials(creds.key, creds.secret, creds.token), "s3",
                region).add_auth(request)
    return {k.lower(): v for k, v in request.headers.items()}


@pytest.mark.parametrize(("endpoint", "key", "token"), [
    ("http://127.0.0.1:9000", "data/index.json", None),
    ("http://localhost", "a b/ü+=,;~/index.json", None),
    ("http://127.0.0.1:9000/prefix/", "index.json", "session-token/+="),
])
def test_the_signature_is_botocores(endpoint, key, token):
    creds = Credentials(CREDS.key, CREDS.secret, token)
    target = target_for("bucket-1", key, endpoint, "eu-west-3")
    assert target is not None
    url = f"{target.scheme}://{target.host_header}{target.path}"
    theirs = botocore_headers(url, "eu-west-3", creds)
    when = calendar.timegm(time.strptime(theirs["x-amz-date"], "%Y%m%dT%H%M%SZ"))
    ours = signed_headers(target, creds, when)
    assert ours["authorization"] == theirs["authorization"]
    assert ours.get("x-amz-security-token") == theirs.get("x-amz-security-token")


def test_aws_itself_needs_a_region_and_a_plain_bucket(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    assert target_for("bucket-1", "index.json", None, None) is None
    assert target_for("dotted.bucket", "index.json", None, "us-west-2") is None
    target = target_for("bucket-1", "d/index.json", None, "us-west-2")
    assert target is not None
    assert (target.host, target.path) == ("bucket-1.s3.us-west-2.amazonaws.com", "/d/index.json")
    (tmp_path / "config").write_text("[default]\n")  # may name another endpoint for s3
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert target_for("bucket-1", "d/index.json", None, "us-west-2") is None


def _get(bucket: str, key: str, endpoint: str) -> bytes | None:
    """The whole object through the boto3-free path, None where it steps aside."""
    body = quick_stream(bucket, key, endpoint, None, connect_timeout=10, read_timeout=10)
    return None if body is None else b"".join(body)


@pytest.mark.slow
def test_it_gets_the_exact_bytes_or_steps_aside(s3_env, monkeypatch, tmp_path):
    bucket = s3_env.make_bucket()
    body = os.urandom(3000) + b"index"
    s3_env.client().put_object(Bucket=bucket, Key="a b/ü/index.json", Body=body)
    assert _get(bucket, "a b/ü/index.json", s3_env.endpoint) == body
    assert _get(bucket, "a b/ü/missing.json", s3_env.endpoint) is None
    monkeypatch.setenv("AWS_PROFILE", "someone")  # botocore's configuration decides
    assert _get(bucket, "a b/ü/index.json", s3_env.endpoint) is None
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    assert _get(bucket, "a b/ü/index.json", s3_env.endpoint) is None
    got = fetch(f"s3://{bucket}/a b/ü/index.json", tmp_path / "index.json", max_parts=1)
    assert got.read_bytes() == body  # through boto3


START = """
import json, sys
from streaming import StreamingDataset
ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], shuffle=True, batch_size=4)
ids = [int(s["id"]) for s in ds]
print(json.dumps({"ids": len(set(ids)), "botocore": "botocore" in sys.modules}))
"""


@pytest.mark.slow
def test_ranges_come_exact_and_server_errors_are_raised_not_retried_by_boto3(
        s3_env, fault_proxy, monkeypatch):
    bucket = s3_env.make_bucket()
    body = os.urandom(5 << 20)
    s3_env.client().put_object(Bucket=bucket, Key="shard.mds", Body=body)
    timeouts = {"connect_timeout": 10, "read_timeout": 10}
    for start, end in ((0, 1), (17, 3 << 20), (None, 100), (4 << 20, None), (None, None)):
        stream = quick_stream(bucket, "shard.mds", s3_env.endpoint, None, start=start, end=end,
                              chunk=1 << 16, **timeouts)
        assert stream is not None
        assert b"".join(stream) == body[start:end], (start, end)
    assert quick_stream(bucket, "missing.mds", s3_env.endpoint, None, **timeouts) is None
    proxy = fault_proxy(fail_keys=["shard.mds"], fail_with="503")
    with pytest.raises(StorageError, match="S3 error 503") as raised:
        quick_stream(bucket, "shard.mds", proxy.endpoint, None, **timeouts)
    assert raised.value.retryable and raised.value.overload
    assert proxy.count("GET", f"/{bucket}/shard.mds") == 1


@pytest.mark.slow
def test_a_start_fresh_or_warm_builds_no_boto3_client(s3_env, tmp_path):
    """Downloads of a fresh cache and the index.json of a warm start, all without boto3."""
    data, bucket = tmp_path / "data", s3_env.make_bucket()
    with MDSWriter(columns={"id": "int"}, out=str(data), size_limit=200,
                   compression="zstd") as w:
        for i in range(100):
            w.write({"id": i})
    client = s3_env.client()
    for path in data.iterdir():
        client.upload_file(str(path), bucket, f"ds/{path.name}")
    remote, local = f"s3://{bucket}/ds", str(tmp_path / "cache")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for start in ("fresh", "warm"):
        run = subprocess.run([sys.executable, "-c", START, remote, local], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert json.loads(run.stdout.splitlines()[-1]) == {"ids": 100, "botocore": False}, start
