"""The S3 backend against a real S3-compatible server process (moto standalone)."""

from __future__ import annotations

import json
import os
import pickle
import time

import pytest

from streaming.errors import (
    AccessDeniedError,
    ObjectChangedError,
    ObjectNotFoundError,
    StorageError,
)
from streaming.format.hashing import hexdigest
from streaming.storage import backend_for, fetch, upload
from streaming.storage import s3 as s3_module
from streaming.storage.s3 import S3Backend
from tests.support.processes import free_port
from tests.support.s3server import start_s3_server

pytestmark = pytest.mark.slow


@pytest.fixture
def bucket(s3_env):
    return s3_env.make_bucket()


def test_put_get_range_size_exists_list_delete(bucket):
    backend, key = backend_for(f"s3://{bucket}/data/index.json")
    assert isinstance(backend, S3Backend) and key == "data/index.json"
    backend.put(key, b'{"shards": []}')
    backend.put("data/shard.00000.mds", bytes(range(256)))
    backend.put("database/other", b"x")
    assert backend.get(key) == b'{"shards": []}'
    assert backend.get_range("data/shard.00000.mds", 10, 20) == bytes(range(10, 20))
    assert backend.size("data/shard.00000.mds") == 256
    assert backend.exists(key) and not backend.exists("data/nope")
    assert backend.list("data/") == ["data/index.json", "data/shard.00000.mds"]
    assert backend.list("data") == ["data/index.json", "data/shard.00000.mds", "database/other"]
    backend.delete(key)
    assert backend.list("data/") == ["data/shard.00000.mds"]
    assert pickle.loads(pickle.dumps(backend)) == backend


def test_a_conditional_range_reads_only_the_listed_version(bucket):
    backend, _ = backend_for(f"s3://{bucket}/v")
    backend.put("v/obj", bytes(range(100)))
    etag = backend.list_versions("v/")["v/obj"].etag
    assert etag and backend.list_versions("v/")["v/obj"].size == 100
    assert backend.get_range("v/obj", 5, 9, if_match=etag) == bytes(range(5, 9))
    backend.put("v/obj", bytes(range(1, 101)))  # same size, another version
    with pytest.raises(ObjectChangedError, match=r"s3://.*/v/obj: the object changed"):
        backend.get_range("v/obj", 5, 9, if_match=etag)


def test_missing_object_and_bucket_errors_name_them(bucket):
    backend, _ = backend_for(f"s3://{bucket}/x")
    with pytest.raises(ObjectNotFoundError, match=rf"s3://{bucket}/missing/key: no such object"):
        backend.get("missing/key")
    with pytest.raises(ObjectNotFoundError, match=rf"s3://{bucket}/missing/key: no such object"):
        backend.size("missing/key")
    gone, _ = backend_for("s3://no-such-bucket-here/x")
    for call in (lambda: gone.get("x"), lambda: gone.size("x"), lambda: gone.list("")):
        with pytest.raises(ObjectNotFoundError, match="'no-such-bucket-here' does not exist"):
            call()


def test_fetch_missing_object_fails_fast_without_retrying(bucket, tmp_path):
    start = time.monotonic()
    with pytest.raises(ObjectNotFoundError, match="no such object"):
        fetch(f"s3://{bucket}/nope", tmp_path / "nope", retry=5, backoff=5.0)
    assert time.monotonic() - start < 3.0  # five retries with 5 s backoff would take far longer


def test_large_object_downloads_as_parallel_ranges(s3_env, fault_proxy, monkeypatch, tmp_path):
    bucket = s3_env.make_bucket()
    data = os.urandom(40 << 20)
    s3_env.client().put_object(Bucket=bucket, Key="big.mds", Body=data)
    proxy = fault_proxy()  # no faults: only counts requests
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    sha = hexdigest("sha256", data)
    out = fetch(f"s3://{bucket}/big.mds", tmp_path / "big.mds", expected_hashes={"sha256": sha})
    assert out.read_bytes() == data
    assert proxy.count("GET", f"/{bucket}/big.mds") == 5  # 40 MiB in 8 MiB parts
    assert proxy.count("HEAD", f"/{bucket}/big.mds") == 1  # size was not given
    assert os.listdir(tmp_path) == ["big.mds"]


def test_upload_small_and_multipart(s3_env, monkeypatch, tmp_path):
    bucket = s3_env.make_bucket()
    monkeypatch.setattr(s3_module, "MULTIPART_THRESHOLD", 8 << 20)
    monkeypatch.setattr(s3_module, "MULTIPART_CHUNK", 6 << 20)
    for name, size in (("small.bin", 1000), ("large.bin", 12 << 20)):
        data = os.urandom(size)
        (tmp_path / name).write_bytes(data)
        upload(tmp_path / name, f"s3://{bucket}/up/{name}")
        got = s3_env.client().get_object(Bucket=bucket, Key=f"up/{name}")
        assert got["Body"].read() == data
    parts = s3_env.client().head_object(Bucket=bucket, Key="up/large.bin")["ETag"]
    assert parts.strip('"').endswith("-2")  # ETag '<md5>-2': two 6 MiB parts
    with pytest.raises(ObjectNotFoundError, match="no such file to upload"):
        upload(tmp_path / "absent", f"s3://{bucket}/x")
    with pytest.raises(ObjectNotFoundError, match="does not exist"):
        upload(tmp_path / "small.bin", "s3://no-such-bucket-here/x", retry=3, backoff=5.0)


def test_unreachable_endpoint_fails_within_deadline(monkeypatch, s3_server, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for key, value in {**s3_server.env(), "S3_ENDPOINT_URL": dead}.items():
        monkeypatch.setenv(key, value)
    start = time.monotonic()
    with pytest.raises(StorageError, match=rf"s3://b/k.*after 2 attempt.*{dead}") as info:
        fetch("s3://b/k", tmp_path / "k", expected_size=10, timeout=1.0, retry=1, backoff=0.1)
    assert time.monotonic() - start < 5.0
    assert not isinstance(info.value, (ObjectNotFoundError, AccessDeniedError))


def test_no_credentials_says_how_to_provide_them(monkeypatch, s3_server, tmp_path):
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_server.endpoint)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(AccessDeniedError, match=r"s3://b/k: no AWS credentials found.*AWS_ACCESS"):
        fetch("s3://b/k", tmp_path / "k", retry=3, backoff=5.0)


@pytest.fixture(scope="module")
def auth_server():
    """A second moto server that enforces IAM: a reader may get `open/*` but not `secret/*`."""
    setup_calls = 6  # requests allowed before authorization starts (the set-up below)
    server = start_s3_server(env={"INITIAL_NO_AUTH_ACTION_COUNT": str(setup_calls)})
    try:
        import boto3

        iam = boto3.client("iam", endpoint_url=server.endpoint, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        iam.create_user(UserName="reader")
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        resource = "arn:aws:s3:::guarded/open/*"
        allow = {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": resource}
        policy = {"Version": "2012-10-17", "Statement": [allow]}
        iam.put_user_policy(UserName="reader", PolicyName="read-open",
                            PolicyDocument=json.dumps(policy))
        client = server.client()
        client.create_bucket(Bucket="guarded")
        client.put_object(Bucket="guarded", Key="open/a", Body=b"visible")
        client.put_object(Bucket="guarded", Key="secret/a", Body=b"hidden")
        server.credentials.update(
            AWS_ACCESS_KEY_ID=key["AccessKeyId"], AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"]
        )
        yield server
    finally:
        server.stop()


def test_forbidden_object_is_access_denied_and_not_retried(auth_server, monkeypatch, tmp_path):
    for key, value in auth_server.env().items():
        monkeypatch.setenv(key, value)
    assert fetch("s3://guarded/open/a", tmp_path / "a").read_bytes() == b"visible"
    start = time.monotonic()
    with pytest.raises(AccessDeniedError, match=r"s3://guarded/secret/a: access denied"):
        fetch("s3://guarded/secret/a", tmp_path / "b", retry=3, backoff=5.0)
    assert time.monotonic() - start < 3.0
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("claimed", "why"),
    [
        (5 << 19, r"after 2 attempt.*larger than expected"),  # retried: might be in flux
        (7 << 19, r"^s3://[^ ]*/obj: S3 error InvalidRange"),  # other 4xx: raised at once
    ],
)
def test_ranged_download_refuses_an_object_of_another_size(bucket, s3_env, tmp_path, claimed, why):
    s3_env.client().put_object(Bucket=bucket, Key="obj", Body=os.urandom(3 << 20))
    with pytest.raises(StorageError, match=why):
        fetch(f"s3://{bucket}/obj", tmp_path / "obj", expected_size=claimed, retry=1,
              backoff=0.05, range_threshold=1 << 20, part_size=1 << 20)
    assert os.listdir(tmp_path) == []


def _client_state_after_fork(queue) -> None:
    s3_module._client("http://127.0.0.1:9", "us-east-1", 1.0, 1.0)
    queue.put((s3_module._clients.pid == os.getpid(), len(s3_module._clients)))


def test_forked_children_build_their_own_client():
    import multiprocessing

    parent_client = s3_module._client("http://127.0.0.1:9", "us-east-1", 1.0, 1.0)
    assert s3_module._client("http://127.0.0.1:9", "us-east-1", 1.0, 1.0) is parent_client
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_client_state_after_fork, args=(queue,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == (True, 1)  # the parent's clients were dropped, one new one


def test_clients_share_one_model_loader_and_stay_separate_per_setting(s3_env):
    from streaming.storage import s3

    first = s3._client(s3_env.endpoint, None, 5.0, 7.0)
    other = s3._client(s3_env.endpoint, None, 5.0, 8.0)
    assert first is not other  # different timeouts, different clients
    loader = s3._loader
    assert loader is not None
    assert s3._botocore_session().get_component("data_loader") is loader  # parsed models reused
