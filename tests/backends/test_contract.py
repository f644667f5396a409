"""Every backend keeps the storage contract: object operations, typed errors naming the URL,
fail-fast on permanent errors, real deadlines, parallel ranges and single-flight downloads."""

from __future__ import annotations

import os
import pickle
import threading
import time

import pytest

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    ObjectNotFoundError,
    StorageError,
    UnsupportedFeatureError,
)
from streaming.format.hashing import hexdigest
from streaming.storage import backend_for, fetch, fetch_once, upload
from tests.support.azurite import KEY
from tests.support.processes import free_port
from tests.support.stores import AzureStore
from writers.mds import MDSWriter

pytestmark = pytest.mark.slow


def test_read_operations_and_pickling(store_env, tmp_path):
    space = store_env.space()
    store_env.put(space, "data/shard.00000.mds", bytes(range(256)) * 4)
    store_env.put(space, "data/index.json", b'{"shards": []}')
    backend, key = backend_for(store_env.url(space, "data/shard.00000.mds"))
    assert backend.get(key) == bytes(range(256)) * 4
    assert backend.get_range(key, 10, 20) == bytes(range(10, 20))
    assert backend.get_range(key, 1000, None) == (bytes(range(256)) * 4)[1000:]
    assert backend.size(key) == 1024
    assert backend.exists(key) and not backend.exists(key + ".nope")
    assert pickle.loads(pickle.dumps(backend)) == backend
    index = fetch(store_env.url(space, "data/index.json"), tmp_path / "index.json")
    assert index.read_bytes() == b'{"shards": []}'


def test_write_operations(store_env, tmp_path):
    space = store_env.space()
    backend, root = backend_for(store_env.url(space, "w"))
    if not store_env.writable:
        for call in (lambda: backend.put(root + "/x", b"x"), lambda: backend.list(root),
                     lambda: backend.list_sizes(root), lambda: backend.delete(root + "/x")):
            with pytest.raises(UnsupportedFeatureError, match="read-only"):
                call()
        with pytest.raises(UnsupportedFeatureError, match="read-only"):  # before any shard
            MDSWriter(columns={"id": "int"}, out=store_env.url(space, "w"))
        return
    backend.put(f"{root}/a", b"first")
    backend.put(f"{root}/b/c", b"second")
    backend.put("wx/d", b"other")
    assert backend.list(f"{root}/") == [f"{root}/a", f"{root}/b/c"]
    assert backend.list(root) == [f"{root}/a", f"{root}/b/c", "wx/d"]
    assert backend.list_sizes(f"{root}/") == {f"{root}/a": 5, f"{root}/b/c": 6}
    big = os.urandom(9 << 20)  # above GCS's single-request and a resumable upload's chunk
    (tmp_path / "big").write_bytes(big)
    upload(tmp_path / "big", store_env.url(space, "w/big"))
    assert store_env.read_dir(space, "w")["big"] == big
    backend.delete(f"{root}/a")
    backend.delete(f"{root}/a")  # a missing object is not an error
    assert backend.list(f"{root}/") == [f"{root}/b/c", f"{root}/big"]
    with pytest.raises(ObjectNotFoundError, match="no such file to upload"):
        upload(tmp_path / "absent", store_env.url(space, "w/x"))


def test_missing_object_fails_fast_naming_the_url(store_env, tmp_path):
    url = store_env.url(store_env.space(), "missing/shard.00003.mds")
    start = time.monotonic()
    with pytest.raises(ObjectNotFoundError, match=f"{_tail(url)}: no such object"):
        fetch(url, tmp_path / "x", retry=5, backoff=5.0)
    backend, key = backend_for(url)
    with pytest.raises(ObjectNotFoundError, match="no such object"):
        backend.size(key)
    assert time.monotonic() - start < 3.0  # five retries with 5 s backoff would take far longer
    assert os.listdir(tmp_path) == []


def test_missing_bucket_is_named(store_env, tmp_path):
    if not store_env.has_buckets:
        pytest.skip("an HTTP URL names no bucket")
    url = store_env.url("no-such-bucket-here", "k")
    backend, key = backend_for(url)
    calls = [lambda: backend.get(key), lambda: backend.size(key),
             lambda: fetch(url, tmp_path / "k", retry=3, backoff=5.0)]
    if store_env.writable:
        calls.append(lambda: backend.list(""))
    for call in calls:
        with pytest.raises(ObjectNotFoundError, match="'no-such-bucket-here' does not exist"):
            call()


def test_unreachable_endpoint_gives_up_within_the_deadline(store, monkeypatch, tmp_path):
    class Dead:  # what a FaultProxy looks like to Store.url / Store.env, with nothing listening
        endpoint = f"http://127.0.0.1:{free_port()}"

    for key, value in store.env(Dead()).items():
        monkeypatch.setenv(key, value)
    url = store.url("bucket", "k", via=Dead())
    start = time.monotonic()
    with pytest.raises(StorageError, match=r"after 2 attempt.*cannot reach") as info:
        fetch(url, tmp_path / "k", expected_size=10, timeout=1.0, retry=1, backoff=0.1)
    assert time.monotonic() - start < 5.0
    assert url.split("://", 1)[1] in str(info.value)
    assert not isinstance(info.value, (ObjectNotFoundError, AccessDeniedError))


def test_forbidden_object_is_access_denied_and_not_retried(store_env, proxy_for, monkeypatch,
                                                          tmp_path):
    if store_env.kind not in ("azure", "http"):
        pytest.skip(f"the {store_env.kind} test server does not enforce access rights here "
                    "(S3's are checked in tests/storage/test_s3.py)")
    space = store_env.space()
    store_env.put(space, "forbidden/a", b"x")  # the HTTP test server refuses such paths
    proxy = proxy_for()  # no faults: it only counts requests
    if store_env.kind == "azure":
        bad_key = KEY[:-8] + "AAAAAAA="  # a valid base64 key the account does not have
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", store_env.server.env(
            proxy.endpoint, key=bad_key)["AZURE_STORAGE_CONNECTION_STRING"])
    url = store_env.url(space, "forbidden/a", via=proxy)
    start = time.monotonic()
    with pytest.raises(AccessDeniedError, match=f"{_tail(url)}: access denied"):
        fetch(url, tmp_path / "a", retry=3, backoff=5.0)
    assert time.monotonic() - start < 3.0
    path = store_env.request_path(space, "forbidden/a")
    assert proxy.count("GET", path) + proxy.count("HEAD", path) == 1  # asked once, not retried


def test_azure_without_credentials_says_how_to_provide_them(azurite_server, monkeypatch,
                                                            tmp_path):
    store = AzureStore(azurite_server)
    space = store.space()
    store.put(space, "a", b"x")
    anonymous = f"BlobEndpoint={azurite_server.endpoint}/devstoreaccount1;"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", anonymous)
    with pytest.raises(AccessDeniedError, match=rf"az://{space}/a: no Azure credentials found"):
        fetch(f"az://{space}/a", tmp_path / "a", retry=3, backoff=5.0)


def test_stalled_object_gives_up_after_timeout_times_attempts(store_env, proxy_for, tmp_path):
    space = store_env.space()
    store_env.put(space, "slow/shard.00000.mds", os.urandom(50_000))
    proxy = proxy_for(fail_keys=["shard.00000"], fail_with="stall", stall_seconds=30.0)
    url = store_env.url(space, "slow/shard.00000.mds", via=proxy)
    start = time.monotonic()
    with pytest.raises(DownloadTimeoutError, match=r"after 2 attempt"):
        fetch(url, tmp_path / "s", expected_size=50_000, timeout=1.0, retry=1, backoff=0.1)
    took = time.monotonic() - start
    assert 1.0 <= took < 1.0 * 2 + 3.0, took  # two attempts of 1 s each, a short pause, slack
    assert proxy.count("GET", store_env.request_path(space, "slow/shard.00000.mds")) == 2


def test_large_object_comes_down_as_parallel_ranges_checked_by_hash(store_env, proxy_for,
                                                                    tmp_path):
    space = store_env.space()
    data = os.urandom(5 << 20)
    store_env.put(space, "big.mds", data)
    proxy = proxy_for()  # no faults: it only counts requests
    out = fetch(store_env.url(space, "big.mds", via=proxy), tmp_path / "big.mds",
                expected_size=len(data), expected_hashes={"sha256": hexdigest("sha256", data)},
                range_threshold=1 << 20, part_size=1 << 20)
    assert out.read_bytes() == data
    ranges = proxy.header_values("GET", store_env.request_path(space, "big.mds"))
    assert sorted(ranges) == sorted(f"bytes={i << 20}-{((i + 1) << 20) - 1}" if i < 4
                                    else f"bytes={4 << 20}-" for i in range(5))
    assert os.listdir(tmp_path) == ["big.mds"]


def test_concurrent_fetches_of_one_object_download_it_once(store_env, proxy_for, tmp_path):
    space = store_env.space()
    data = os.urandom(200_000)
    store_env.put(space, "shared/shard.00000.mds", data)
    proxy = proxy_for(delay=0.3)  # slow enough that every caller arrives while one downloads
    url = store_env.url(space, "shared/shard.00000.mds", via=proxy)
    results: list[bytes] = []

    def one() -> None:
        results.append(fetch_once(url, tmp_path / "s.mds", expected_size=len(data)).read_bytes())

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [data] * 4
    assert proxy.count("GET", store_env.request_path(space, "shared/shard.00000.mds")) == 1


def _tail(url: str) -> str:
    """The part of a URL that an error message must quote (regex-escaped)."""
    import re

    return re.escape(url.split("://", 1)[1])
