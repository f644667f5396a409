"""StreamingDataset over a real S3 server (moto on loopback) through the cache engine: remote and
local streams give the same epoch (also through a proxy failing one request in five),
cache_limit holds on disk with DataLoader workers, a too-small limit is refused up front, two
training processes download each shard once, and a corrupt shard surfaces as HashMismatchError
in the training process."""

from __future__ import annotations

import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.errors import (
    CacheLimitError,
    HashMismatchError,
    StateMismatchError,
)
from streaming.format.index import read_index
from streaming.stream import Stream
from tests.support.datasets import upload_dir, write_dataset, write_ids
from tests.support.epochs import (
    assert_epoch_fails,
    loader_epoch,
    raw_bytes,
    train_rank,
    watched_epoch,
    whole_sample,
)
from tests.support.folder_size import peak_size
from tests.support.fresh import fresh_context

SAMPLES = 2000


@pytest.fixture(scope="module")
def bucket(s3_server, tmp_path_factory) -> tuple[str, Path, Path]:
    """Bucket with `big/` (zstd, ~60 samples per shard, ids 0..SAMPLES-1) and `ids/` (zstd, ids
    from 10_000); returns the bucket and the local copies of both."""
    root = tmp_path_factory.mktemp("src")
    big, ids = root / "big", root / "ids"
    write_dataset(big, SAMPLES, size_limit=32_000)
    write_ids(ids, 400, start=10_000, compression="zstd", hashes=["sha1"])
    client = s3_server.client()
    name = s3_server.make_bucket()
    upload_dir(client, name, "big", big)
    upload_dir(client, name, "ids", ids)
    return name, big, ids


@pytest.mark.slow
@pytest.mark.parametrize("limited", [False, True])
def test_remote_and_local_streams_read_like_the_same_streams_local(s3_env, bucket, tmp_path,
                                                                   limited):
    name, big, ids = bucket
    mixed = [Stream(remote=f"s3://{name}/big", local=tmp_path / "c_big"), Stream(local=ids),
             Stream(remote=f"s3://{name}/ids", local=tmp_path / "c_ids")]
    local = [Stream(local=big), Stream(local=ids), Stream(local=ids)]
    # An explicit block: a limit would otherwise size the block to the cache (another order).
    config = dict(batch_size=16, shuffle=True, shuffle_seed=5, num_canonical_nodes=1,
                  shuffle_block_size=1 << 18)
    limit = raw_bytes(big) if limited else None  # remote shards then read one at a time
    got = loader_epoch(StreamingDataset(streams=mixed, cache_limit=limit, **config), workers=2)
    want = loader_epoch(StreamingDataset(streams=local, **config), workers=2)
    assert got == want
    assert sorted(set(got)) == sorted([*range(SAMPLES), *range(10_000, 10_400)])


@pytest.mark.slow
def test_one_fault_in_five_requests_gives_the_local_epoch_sample_for_sample(
        s3_env, bucket, fault_proxy, tmp_path, monkeypatch):
    name, big, _ = bucket
    proxy = fault_proxy(rate=0.2, seed=11, stall_seconds=2.0)  # 500, 503, reset, stall, truncate
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    config = dict(batch_size=16, shuffle=True, shuffle_seed=3, num_canonical_nodes=1)

    remote = StreamingDataset(remote=f"s3://{name}/big", local=str(tmp_path / "cache"),
                              download_retry=6, download_timeout=0.5, validate_hash="xxh64",
                              **config)
    got = loader_epoch(remote, 2, whole_sample)
    want = loader_epoch(StreamingDataset(local=str(big), **config), 2, whole_sample)
    assert got == want and len(got) == SAMPLES
    assert sum(proxy.injected.values()) > 0, proxy.injected


@pytest.mark.slow
def test_quarter_cache_limit_holds_on_disk_with_two_workers(s3_env, bucket, tmp_path):
    name, big, _ = bucket
    cache = tmp_path / "cache"
    limit = raw_bytes(big) // 4
    ds = StreamingDataset(remote=f"s3://{name}/big", local=str(cache), cache_limit=limit,
                          batch_size=16, shuffle=True, predownload=64)
    seen, peak, stats = watched_epoch(ds, cache)
    assert sorted(seen) == list(range(SAMPLES))
    assert 0 < peak <= limit
    shards = len(read_index(big / "index.json").shards)
    # The shuffle block is sized to the cache, so each shard is fetched about once (a block
    # spanning the epoch, the default, re-fetched every shard for almost every read).
    assert stats.evictions > 0 and shards <= stats.downloads <= 1.5 * shards, stats


def test_random_access_under_a_cache_limit(s3_env, bucket, tmp_path):
    name, big, _ = bucket
    cache = tmp_path / "cache"
    limit = raw_bytes(big) // 4
    ds = StreamingDataset(remote=f"s3://{name}/big", local=str(cache), cache_limit=limit)
    try:
        with peak_size(cache) as peak:
            picks = list(range(0, SAMPLES, 37)) + [-1]
            got = [int(ds[i]["id"]) for i in picks]
        stats = ds.cache_stats()
    finally:
        ds.close()
    assert got == [i % SAMPLES for i in picks]
    assert peak[0] <= limit and stats.evictions > 0


def test_too_small_cache_limit_is_refused_at_construction_with_the_minimum(s3_env, bucket,
                                                                           tmp_path):
    name = bucket[0]
    with pytest.raises(CacheLimitError, match="needs at least") as info:
        StreamingDataset(remote=f"s3://{name}/big", local=str(tmp_path / "c"), cache_limit=1000,
                         batch_size=16)
    minimum = int(re.search(r"needs at least (\d+) bytes", str(info.value)).group(1))
    ds = StreamingDataset(remote=f"s3://{name}/big", local=str(tmp_path / "c2"),
                          cache_limit=minimum, batch_size=16)  # exactly the minimum is accepted
    ds.close()


@pytest.mark.slow
def test_two_training_processes_share_the_cache_and_download_each_shard_once(
        s3_env, bucket, fault_proxy, tmp_path):
    name, big, _ = bucket
    proxy = fault_proxy()  # no faults: it only counts requests
    env = {**s3_env.env(), "S3_ENDPOINT_URL": proxy.endpoint}
    args = (env, f"s3://{name}/big", str(tmp_path / "cache"))
    with ProcessPoolExecutor(2, mp_context=fresh_context()) as pool:
        futures = [pool.submit(train_rank, *args, rank, 2) for rank in range(2)]
        results = [f.result(timeout=120) for f in futures]
    assert sorted(i for ids, _ in results for i in ids) == list(range(SAMPLES))
    shards = read_index(big / "index.json").zip_basenames
    gets = [proxy.count("GET", f"/{name}/big/{shard}") for shard in shards]
    assert gets == [1] * len(shards)
    assert max(stats["downloads"] for _, stats in results) == len(shards)


@pytest.mark.slow
def test_corrupt_shard_in_the_bucket_raises_hash_mismatch_in_training(s3_env, bucket, tmp_path):
    name, _, ids = bucket
    client = s3_env.client()
    victim = read_index(ids / "index.json").zip_basenames[2]
    body = bytearray((ids / victim).read_bytes())
    body[len(body) // 2] ^= 0xFF
    client.put_object(Bucket=name, Key=f"bad/{victim}", Body=bytes(body))
    for path in ids.iterdir():
        if path.name != victim:
            client.upload_file(str(path), name, f"bad/{path.name}")
    ds = StreamingDataset(remote=f"s3://{name}/bad", local=str(tmp_path / "c"),
                          validate_hash="sha1", batch_size=16)
    assert_epoch_fails(ds, StreamingDataLoader(ds, batch_size=16, num_workers=2),
                       HashMismatchError, victim)


def test_a_cache_limit_sizes_the_default_shuffle_block_and_keeps_an_explicit_one(
        s3_env, bucket, tmp_path, caplog):
    name, big, _ = bucket
    limit = raw_bytes(big) // 4
    common = dict(remote=f"s3://{name}/big", cache_limit=limit, batch_size=16, shuffle=True)
    with caplog.at_level("WARNING", logger="streaming.dataset.streaming_dataset"):
        sized = StreamingDataset(local=str(tmp_path / "a"), **common)
    try:
        block = sized.config.shuffle_block_size
        per_shard = int(np.median(sized.samples_per_shard))
        assert block is not None and per_shard <= block < SAMPLES // 4
        assert f"blocks of {block} samples" in caplog.text
        state = sized.state_dict(32, from_beginning=True)
    finally:
        sized.close()
    # A block of 5000 samples makes each batch reach more shards than a quarter holds: the
    # limit is refused with the minimum that plan needs; just above it, the block is kept, but
    # the user learns it will download shards again.
    with pytest.raises(CacheLimitError) as refused:
        StreamingDataset(local=str(tmp_path / "b"), shuffle_block_size=5000, **common)
    needed = int(re.search(r"needs at least (\d+) bytes", str(refused.value)).group(1))
    common["cache_limit"] = int(needed * 1.1)
    caplog.clear()
    with caplog.at_level("WARNING", logger="streaming.dataset.streaming_dataset"):
        explicit = StreamingDataset(local=str(tmp_path / "b"), shuffle_block_size=5000, **common)
    assert f"shuffle_block_size=5000 is more than cache_limit={common['cache_limit']} can hold" \
        in caplog.text
    unlimited = StreamingDataset(remote=f"s3://{name}/big", local=str(tmp_path / "c"),
                                 batch_size=16, shuffle=True)
    try:
        assert explicit.config.shuffle_block_size == 5000
        assert unlimited.config.shuffle_block_size is None
        with pytest.raises(StateMismatchError):  # the block is part of the order
            unlimited.load_state_dict(state)
    finally:
        explicit.close()
        unlimited.close()
