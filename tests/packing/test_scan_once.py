"""Lengths not recorded are scanned once per node, a few shards at a time: several real rank
processes of one node (launcher variables only) start a packed dataset over one S3 remote (moto
on loopback, behind a proxy that answers after a delay) at once; one of them downloads and
scans the shards, the others read its result, and the proxy counts one GET per shard."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.dataset import lengths as lengths_module
from streaming.dataset.lengths import SCAN_AT_ONCE, load_lengths
from streaming.errors import DownloadTimeoutError
from streaming.format.index import read_index
from streaming.storage.singleflight import single_flight
from tests.support.datasets import upload_dir, write_tokens
from tests.support.node_ranks import run_node_ranks

RANKS = 3
DELAY = 0.5  # seconds the proxy waits before answering each request
CHILD = """
import sys
from streaming import PackedStreamingDataset, StreamingDataset
ds = PackedStreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=4, packing_length=512)
print(int(ds.lengths.sum()), len(ds.lengths))
ds.close()
"""


def test_one_rank_of_the_node_downloads_and_scans(s3_env, fault_proxy, tmp_path) -> None:
    src = tmp_path / "src"
    sizes = write_tokens(src, 200, lengths=None, compression="zstd", size_limit=1 << 13)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    proxy = fault_proxy(delay=0.2)  # a scan far longer than the ranks' start-up skew
    env = {**os.environ, "S3_ENDPOINT_URL": proxy.endpoint}
    out = run_node_ranks(["-c", CHILD, f"s3://{bucket}/ds", str(tmp_path / "cache")], RANKS, env)
    assert out == [f"{int(np.sum(sizes))} {len(sizes)}"] * RANKS
    shards = [Path(name).name for name in read_index(src).zip_basenames]
    assert len(shards) > 3
    assert [proxy.count("GET", f"/{bucket}/ds/{name}") for name in shards] == [1] * len(shards)


def test_a_scan_reads_a_few_shards_at_once(s3_env, fault_proxy, tmp_path, monkeypatch) -> None:
    src = tmp_path / "src"
    sizes = write_tokens(src, 120, lengths=None, compression="zstd", size_limit=1 << 13)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    proxy = fault_proxy(delay=DELAY)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = StreamingDataset(remote=f"s3://{bucket}/ds", local=str(tmp_path / "cache"),
                          batch_size=4)
    np.testing.assert_array_equal(load_lengths(ds, "tokens"), sizes)
    shards = [f"/{bucket}/ds/{Path(name).name}" for name in read_index(src).zip_basenames]
    arrivals = sorted(r.at for r in proxy.log if r.method == "GET" and r.path in shards)
    assert len(arrivals) == len(shards) > SCAN_AT_ONCE
    # SCAN_AT_ONCE at a time: one after the other they would arrive DELAY apart.
    assert arrivals[SCAN_AT_ONCE - 1] - arrivals[0] < DELAY, arrivals
    assert arrivals[SCAN_AT_ONCE] - arrivals[0] >= DELAY * 0.9, arrivals


def test_waiting_for_another_scanner_has_a_deadline(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "ds"
    sizes = write_tokens(folder, 50, lengths=None)
    np.testing.assert_array_equal(load_lengths(str(folder), "tokens"), sizes)
    (cache,) = folder.glob(".lengths.*.u32")
    cache.unlink()
    monkeypatch.setattr(lengths_module, "SCAN_WAIT", 0.3)
    waited = pytest.raises(DownloadTimeoutError,
                           match=r"another process of this node .*'tokens'.*streaming lengths")
    with single_flight(cache, deadline=time.monotonic() + 10), waited:  # another's scan
        load_lengths(str(folder), "tokens")
    np.testing.assert_array_equal(load_lengths(str(folder), "tokens"), sizes)
