"""Transfers through the fault-injecting proxy: retries, deadlines, hashes, single-flight."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from streaming.errors import DownloadTimeoutError, HashMismatchError, StorageError
from streaming.format.hashing import hexdigest
from streaming.storage import fetch, fetch_once

pytestmark = pytest.mark.slow


@pytest.fixture
def objects(random_objects):
    """A bucket with a few small objects of random bytes: (bucket, {key: bytes})."""
    return random_objects(6, 200_000, ".mds")


def test_downloads_survive_one_fault_in_five(objects, fault_proxy, monkeypatch, tmp_path):
    bucket, blobs = objects
    proxy = fault_proxy(rate=0.2, seed=7, stall_seconds=1.5)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    keys = sorted(blobs)
    for i in range(30):
        key = keys[i % len(keys)]
        dest = fetch(f"s3://{bucket}/{key}", tmp_path / f"{i}.mds", expected_size=len(blobs[key]),
                     timeout=1.0, retry=8, backoff=0.05)  # a busy machine adds timeouts
        assert dest.read_bytes() == blobs[key]
    assert sum(proxy.injected.values()) >= 3  # the faults really happened...
    assert len(proxy.injected) >= 3  # ...of several kinds
    assert sorted(os.listdir(tmp_path)) == sorted(f"{i}.mds" for i in range(30))  # no temp files


def test_faulty_large_download_retries_only_the_failed_parts(
    s3_env, fault_proxy, monkeypatch, tmp_path
):
    bucket = s3_env.make_bucket()
    data = os.urandom(24 << 20)
    s3_env.client().put_object(Bucket=bucket, Key="big", Body=data)
    proxy = fault_proxy(rate=0.3, seed=3, faults=("500", "reset", "truncate"), methods=("GET",))
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    out = fetch(f"s3://{bucket}/big", tmp_path / "big", expected_size=len(data), timeout=5.0,
                retry=6, backoff=0.05, part_size=2 << 20, max_parts=4)
    assert out.read_bytes() == data
    failed = sum(proxy.injected.values())
    assert failed > 0
    assert proxy.count("GET", f"/{bucket}/big") == 12 + failed  # one extra GET per failed part


@pytest.mark.parametrize(
    ("fault", "error"), [("stall", DownloadTimeoutError), ("500", StorageError)]
)
def test_always_failing_key_gives_up_within_its_budget(
    objects, fault_proxy, monkeypatch, tmp_path, fault, error
):
    bucket, blobs = objects
    proxy = fault_proxy(fail_keys=["shard.00002"], fail_with=fault, stall_seconds=5.0)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    url = f"s3://{bucket}/shard.00002.mds"
    start = time.monotonic()
    with pytest.raises(error, match=rf"{url}: failed after 3 attempt\(s\); last error"):
        fetch(url, tmp_path / "x", expected_size=len(blobs["shard.00002.mds"]), timeout=1.0,
              retry=2, backoff=0.1)
    elapsed = time.monotonic() - start
    assert elapsed < 3 * 1.0 + 0.3 + 2.5  # attempts x timeout + max backoff + slack
    assert proxy.count("GET", "/" + url.removeprefix("s3://")) == 3
    assert os.listdir(tmp_path) == []


def test_hash_mismatch_is_detected_and_leaves_nothing(objects, s3_env, tmp_path):
    bucket, blobs = objects
    key = "shard.00001.mds"
    good = hexdigest("xxh64", blobs[key])
    fetch(f"s3://{bucket}/{key}", tmp_path / "ok.mds", expected_hashes={"xxh64": good})
    with pytest.raises(HashMismatchError, match=rf"bad.mds \(from s3://{bucket}/{key}\): xxh64"):
        fetch(f"s3://{bucket}/{key}", tmp_path / "bad.mds", expected_hashes={"xxh64": "0" * 16})
    assert os.listdir(tmp_path) == ["ok.mds"]


def _fetch_after_barrier(url: str, dest: str, size: int, barrier) -> None:
    barrier.wait(30)
    fetch_once(url, dest, expected_size=size, timeout=10.0, wait_timeout=60.0)


def test_single_flight_across_processes(objects, fault_proxy, monkeypatch, tmp_path):
    bucket, blobs = objects
    key = "shard.00003.mds"
    proxy = fault_proxy(delay=0.5)  # a slow GET, so all four processes collide
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    dest = tmp_path / "cache" / key
    args = (f"s3://{bucket}/{key}", str(dest), len(blobs[key]), barrier)
    procs = [ctx.Process(target=_fetch_after_barrier, args=args) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    assert dest.read_bytes() == blobs[key]
    assert proxy.count("GET", f"/{bucket}/{key}") == 1
    assert os.listdir(dest.parent) == [key]  # neither temp nor lock files remain


@pytest.mark.parametrize("fault", ["503", "reset"])
def test_slow_down_answers_are_retried_until_the_deadline_not_a_count(
    objects, fault_proxy, monkeypatch, tmp_path, fault
):
    bucket, blobs = objects
    proxy = fault_proxy(fail_keys=["shard.00003"], fail_with=fault)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    url = f"s3://{bucket}/shard.00003.mds"
    start = time.monotonic()
    with pytest.raises(DownloadTimeoutError, match=rf"{url}: failed after \d+ attempt"):
        fetch(url, tmp_path / "x", expected_size=len(blobs["shard.00003.mds"]), timeout=1.0,
              retry=1, backoff=0.05, deadline=4.0)  # room for 3 tries on a busy machine
    assert time.monotonic() - start < 4.0 + 1.0 + 2.5  # deadline + one attempt + slack
    assert proxy.count("GET", "/" + url.removeprefix("s3://")) > 2  # more than retry=1 allows
    assert os.listdir(tmp_path) == []


def test_the_index_fetch_rides_out_slow_down_answers(s3_env, fault_proxy, monkeypatch, tmp_path):
    from streaming import Stream
    from writers.mds import MDSWriter

    with MDSWriter(columns={"id": "int"}, out=str(tmp_path / "src")) as writer:
        for i in range(10):
            writer.write({"id": i})
    bucket = s3_env.make_bucket()
    for path in sorted((tmp_path / "src").iterdir()):
        s3_env.client().upload_file(str(path), bucket, f"ds/{path.name}")
    proxy = fault_proxy(fail_keys=["index.json"], fail_with="503", max_faults=3,
                        retry_after=0.1)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    stream = Stream(remote=f"s3://{bucket}/ds", local=tmp_path / "cache",
                    download_retry=0)  # 503s do not count against download_retry
    index = stream.index_file()
    assert index.read_bytes() == (tmp_path / "src" / "index.json").read_bytes()
    assert proxy.count("GET", f"/{bucket}/ds/index.json") == 4
