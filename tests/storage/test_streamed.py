"""stream_object through the fault-injecting proxy: every byte once, in order, or a clear error."""

from __future__ import annotations

import os
import time

import pytest

from streaming.errors import DownloadTimeoutError, StorageError
from streaming.storage.streamed import stream_object

pytestmark = pytest.mark.slow


@pytest.fixture
def objects(random_objects):
    return random_objects(5, 300_000, ".mds.zstd")


def _collect(url: str, size: int, **options) -> bytes:
    pieces: list[bytes] = []
    stream_object(url, pieces.append, size=size, **options)
    return b"".join(pieces)


def test_a_truncated_get_resumes_where_it_stopped(objects, fault_proxy, monkeypatch):
    bucket, blobs = objects
    key = "shard.00001.mds.zstd"
    proxy = fault_proxy(rate=1.0, seed=1, faults=("truncate",), methods=("GET",), max_faults=1)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    assert _collect(f"s3://{bucket}/{key}", len(blobs[key]), timeout=2.0, retry=2,
                    backoff=0.01) == blobs[key]
    assert proxy.injected == {"truncate": 1}
    # The second GET asked only for the bytes the first one did not deliver.
    ranges = proxy.header_values("GET", f"/{bucket}/{key}", "Range")
    assert ranges[0] is None and ranges[1] == f"bytes={len(blobs[key]) // 2}-"


def test_every_byte_once_in_order_through_one_fault_in_five(objects, fault_proxy, monkeypatch):
    bucket, blobs = objects
    proxy = fault_proxy(rate=0.2, seed=11, stall_seconds=1.5)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    keys = sorted(blobs)
    for i in range(25):
        key = keys[i % len(keys)]
        got = _collect(f"s3://{bucket}/{key}", len(blobs[key]), timeout=1.0, retry=8,
                       backoff=0.05)
        assert got == blobs[key]
    assert sum(proxy.injected.values()) >= 3 and len(proxy.injected) >= 2


def test_a_large_object_widens_into_parallel_ranges_on_a_slow_link(s3_env, fault_proxy,
                                                                      monkeypatch):
    bucket = s3_env.make_bucket()
    data = os.urandom(20 << 20)
    s3_env.client().put_object(Bucket=bucket, Key="big", Body=data)
    # Each connection is capped (as a store caps them), so a consumer that only collects
    # waits for bytes: the GET is cut and the rest comes as ranges, through faults.
    proxy = fault_proxy(rate=0.3, seed=5, faults=("500", "reset", "truncate"), methods=("GET",),
                        bandwidth=24 << 20)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    pieces: list[bytes] = []
    stream_object(f"s3://{bucket}/big", pieces.append, size=len(data), timeout=5.0, retry=6,
                  backoff=0.05, part_size=2 << 20, max_parts=4, range_threshold=4 << 20)
    assert b"".join(pieces) == data
    ranges = proxy.header_values("GET", f"/{bucket}/big", "Range")
    assert ranges[0] is None  # the transfer starts as one plain GET
    assert len({r for r in ranges if r is not None}) >= 4  # and widened into ranges
    assert sum(proxy.injected.values()) > 0


def test_a_consumer_slower_than_the_link_keeps_one_get(s3_env, fault_proxy, monkeypatch):
    bucket = s3_env.make_bucket()
    data = os.urandom(12 << 20)
    s3_env.client().put_object(Bucket=bucket, Key="big", Body=data)
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    pieces: list[bytes] = []

    def slowly(piece: bytes) -> None:  # decompression that takes longer than the transfer
        time.sleep(0.02)
        pieces.append(piece)

    stream_object(f"s3://{bucket}/big", slowly, size=len(data), part_size=2 << 20,
                  max_parts=4, range_threshold=4 << 20)
    assert b"".join(pieces) == data
    assert proxy.header_values("GET", f"/{bucket}/big", "Range") == [None]


def test_a_large_object_larger_than_the_index_says_is_an_error(s3_env):
    bucket = s3_env.make_bucket()
    data = os.urandom(6 << 20)
    s3_env.client().put_object(Bucket=bucket, Key="big", Body=data)
    with pytest.raises(StorageError, match="larger than expected"):
        _collect(f"s3://{bucket}/big", len(data) - 10, retry=0, part_size=1 << 20,
                 max_parts=4, range_threshold=4 << 20)


def test_a_consumer_error_stops_the_transfer_without_a_retry(objects, fault_proxy, monkeypatch):
    bucket, blobs = objects
    key = "shard.00002.mds.zstd"
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)

    def refuse(piece: bytes) -> None:
        raise ValueError("not zstd")

    with pytest.raises(ValueError, match="not zstd"):
        stream_object(f"s3://{bucket}/{key}", refuse, size=len(blobs[key]), retry=3)
    assert proxy.count("GET", f"/{bucket}/{key}") == 1


def test_an_object_larger_than_the_index_says_is_an_error(objects):
    bucket, blobs = objects
    key = "shard.00003.mds.zstd"
    with pytest.raises(StorageError, match="larger than expected"):
        _collect(f"s3://{bucket}/{key}", len(blobs[key]) - 10, retry=0)


def test_a_key_that_always_stalls_gives_up_within_its_budget(objects, fault_proxy, monkeypatch):
    bucket, blobs = objects
    proxy = fault_proxy(fail_keys=["shard.00004"], fail_with="stall", stall_seconds=12.0)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    url = f"s3://{bucket}/shard.00004.mds.zstd"
    start = time.monotonic()
    with pytest.raises(DownloadTimeoutError, match=rf"{url}: failed after 3 attempt\(s\)"):
        _collect(url, len(blobs["shard.00004.mds.zstd"]), timeout=1.0, retry=2, backoff=0.1)
    # under one stall's length: every attempt was cut at its 1 s timeout (slack for a busy machine)
    assert time.monotonic() - start < 3 * 1.0 + 0.3 + 8.0


def test_a_range_that_never_fills_ends_the_wait_with_a_timeout(tmp_path):
    """The consumer's wait for a range has a bound of its own, past the range's retry budget:
    a filler that never delivers (here: never started) cannot hold the consumer forever."""
    from streaming.storage.arriving import ArrivingRange
    from streaming.storage.local_folder import LocalBackend

    path = tmp_path / "object"
    path.write_bytes(b"x" * 100)
    waiting = ArrivingRange(LocalBackend(), str(path), 100, 0, 50, patience=0.2)
    began = time.monotonic()
    with pytest.raises(DownloadTimeoutError, match=r"bytes 0-49: nothing arrived for 0.2 s"):
        list(waiting.take())
    assert time.monotonic() - began < 20.0
