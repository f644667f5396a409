"""A prefetch that failed must not fail the pass once the shard was fetched after all: another
reader of the node brought it, this reader read it, and the pass ends without an error."""

from __future__ import annotations

import time

import numpy as np

from streaming.cache.engine.cache_engine import CacheEngine
from tests.cache.helpers import open_dataset
from tests.support.datasets import upload_dir, write_dataset


def test_a_failed_prefetch_later_fetched_does_not_fail_the_pass(s3_env, fault_proxy, tmp_path,
                                                                 monkeypatch):
    src = tmp_path / "src"
    write_dataset(src, 200, size_limit=8_000)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    handle = open_dataset(f"s3://{bucket}/ds", str(tmp_path / "cache"), retry=0)
    victim = handle.facts.zip_basenames[0]
    proxy = fault_proxy(fail_keys=[victim], fail_with="500", max_faults=1)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    first, second = CacheEngine(handle.preparer), CacheEngine(handle.preparer)
    try:
        first.follow(np.zeros(4, np.int64))  # its prefetcher fails on shard 0 (one 500, no retry)
        deadline = time.monotonic() + 30
        while not proxy.injected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.injected == {"500": 1}
        first.stop()  # the failed prefetch is recorded
        second.prepare(0)  # another reader of the node fetches it: the store answers now
        first.acquire(0)
        first.release(0)
        first.check()  # the end of the pass: nothing failed that was not fetched since
    finally:
        first.close()
        second.close()
