"""The cache engine against a real S3 server (moto, loopback), with real node plans: the limit
holds on disk, too-small limits are refused, faults and corruption surface, and shards are
downloaded once per node."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from streaming.cache.engine.cache_engine import LOCK_SLACK, CacheEngine, shard_footprint
from streaming.cache.policy.minimum_limit import minimum_limit, reader_shards
from streaming.cache.prepare.preparer import zipless_shards
from streaming.errors import (
    CacheLimitError,
    HashMismatchError,
    ShardCorruptError,
    StorageError,
)
from streaming.format.compression import decompress
from streaming.plan import PlanConfig, World, plan_node
from tests.cache.helpers import open_dataset, read_in_order, run_rank
from tests.support.datasets import upload_dir, write_dataset
from tests.support.folder_size import peak_size

SAMPLES = 3000


@pytest.fixture(scope="module")
def bucket(s3_server, tmp_path_factory) -> tuple[str, Path]:
    """A bucket holding one zstd MDS dataset under `ds/`; also returns the local copy."""
    src = tmp_path_factory.mktemp("src")
    write_dataset(src, SAMPLES, size_limit=32_000)
    client = s3_server.client()
    name = s3_server.make_bucket()
    upload_dir(client, name, "ds", src)
    return name, src


def _node_plan(handle, ranks: int, workers: int) -> np.ndarray:
    cfg = PlanConfig(samples_per_shard=handle.locator.samples_per_shard,
                     shards_per_stream=np.array([len(handle.locator.samples_per_shard)]),
                     shuffle=False, batch_size=8, num_canonical_nodes=1)
    return plan_node(cfg, World(1, ranks, workers, 0, 0, 0, 1), epoch=0).ids


@pytest.mark.slow
def test_quarter_limit_holds_on_disk_across_processes_and_threads(s3_env, bucket, tmp_path):
    name, _ = bucket
    remote, local = f"s3://{name}/ds", tmp_path / "cache"
    handle = open_dataset(remote, str(local))
    total = int(handle.facts.raw_bytes.sum() + handle.facts.zip_bytes.sum())
    limit = total // 4
    owner = CacheEngine(handle.preparer, cache_limit=limit)  # keeps the node table alive
    ids = _node_plan(handle, ranks=2, workers=2)
    needed = owner.check_plan(ids, handle.locator.shard_starts)
    assert needed.bytes < limit

    ctx = multiprocessing.get_context("spawn")
    with peak_size(local) as peak, ProcessPoolExecutor(2, mp_context=ctx) as pool:
        futures = [pool.submit(run_rank, s3_env.env(), remote, str(local), ids[r], limit,
                               0.0005) for r in range(2)]
        results = [f.result(timeout=120) for f in futures]
    assert sum(n for n, _ in results) == int((ids >= 0).sum())
    assert 0 < peak[0] <= limit, (peak[0], limit)
    stats = owner.stats()
    assert stats.evictions > 0 and stats.downloads >= len(handle.facts.raw_bytes)
    assert stats.hits + stats.misses >= len(handle.facts.raw_bytes)
    owner.close()


def test_too_small_limit_is_refused_with_the_minimum(s3_env, bucket, tmp_path):
    name, _ = bucket
    handle = open_dataset(f"s3://{name}/ds", str(tmp_path / "cache"))
    ids = _node_plan(handle, ranks=2, workers=2)
    probe = CacheEngine(handle.preparer, cache_limit="1tb")
    minimum = minimum_limit(ids, probe.footprint, handle.locator.shard_starts)
    needed = minimum.bytes + probe.table.other_bytes
    probe.close()
    shards = reader_shards(ids, handle.locator.shard_starts)
    assert minimum.bytes >= handle.facts.raw_bytes[shards[shards >= 0]].max()
    small = CacheEngine(handle.preparer, cache_limit=needed - 1)
    # the table remembers the smallest limit any user of these folders asked for
    with pytest.raises(CacheLimitError, match=f"needs at least {needed} bytes"):
        small.check_plan(ids, handle.locator.shard_starts)
    small.close()


@pytest.mark.slow
def test_faults_one_in_five_every_shard_arrives_intact(s3_env, bucket, fault_proxy, tmp_path,
                                                       monkeypatch):
    name, _ = bucket
    proxy = fault_proxy(rate=0.2, seed=7, stall_seconds=2.0)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    handle = open_dataset(f"s3://{name}/ds", str(tmp_path / "cache"), retry=6, timeout=0.5,
                          validate_hash="xxh64")
    engine = CacheEngine(handle.preparer, predownload=200)
    ids = np.arange(SAMPLES)
    assert read_in_order(handle, engine, ids) == SAMPLES
    assert sum(proxy.injected.values()) > 0
    engine.close()


@pytest.mark.slow
def test_a_shard_that_never_arrives_raises_within_the_retry_budget(s3_env, bucket, fault_proxy,
                                                                   tmp_path, monkeypatch):
    name, _ = bucket
    handle = open_dataset(f"s3://{name}/ds", str(tmp_path / "cache"), retry=1, timeout=0.5)
    victim = handle.facts.zip_basenames[3]
    proxy = fault_proxy(fail_keys=[victim], fail_with="stall", stall_seconds=5.0)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    engine = CacheEngine(handle.preparer, predownload=1)
    engine.follow(np.arange(len(handle.facts.raw_bytes)))
    engine.acquire(0)
    engine.release(0)
    started = time.monotonic()
    with pytest.raises(StorageError, match=victim):
        engine.acquire(3)
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 * (1 + 1) + 2.0, elapsed
    engine.close()


def _upload_corrupted(client, bucket: str, prefix: str, src: Path, which: int, damage) -> str:
    """Upload the dataset under `prefix/`, then replace its `which`-th zstd shard with a copy
    that `damage(bytearray)` changed in place; returns that shard's name."""
    upload_dir(client, bucket, prefix, src)
    victim = sorted(p.name for p in src.iterdir() if p.name.endswith(".zstd"))[which]
    data = bytearray((src / victim).read_bytes())
    damage(data)
    client.put_object(Bucket=bucket, Key=f"{prefix}/{victim}", Body=bytes(data))
    return victim


def test_a_corrupted_shard_raises_hash_mismatch_naming_it(s3_env, bucket, tmp_path):
    name, src = bucket

    def flip(data: bytearray) -> None:
        data[len(data) // 2] ^= 0xFF

    victim = _upload_corrupted(s3_env.client(), name, "cds", src, 2, flip)
    handle = open_dataset(f"s3://{name}/cds", str(tmp_path / "cache"), validate_hash="xxh64")
    engine = CacheEngine(handle.preparer)
    shard = handle.facts.zip_basenames.index(victim)
    with pytest.raises(HashMismatchError, match=victim):
        engine.acquire(shard)
    assert not (tmp_path / "cache" / victim).exists()
    assert engine.table.reserved.sum() == 0  # the failed preparation gave its space back
    engine.close()


def test_zstd_shards_are_decompressed_while_they_download(s3_env, bucket, fault_proxy,
                                                         monkeypatch, tmp_path):
    name, src = bucket
    proxy = fault_proxy(rate=0.3, seed=4, faults=("truncate", "reset", "500"), methods=("GET",))
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    handle = open_dataset(f"s3://{name}/ds", str(tmp_path / "cache"), retry=6, timeout=5.0,
                          validate_hash="xxh64")

    def no_zip_on_disk(*args, **kwargs):
        raise AssertionError("a compressed copy was written and decompressed from disk")

    monkeypatch.setattr("streaming.cache.prepare.preparer.decompress_file", no_zip_on_disk)
    for shard in range(len(handle.facts.raw_bytes)):
        raw = handle.preparer.prepare(shard)
        zipped = src / handle.facts.zip_basenames[shard]
        assert raw.read_bytes() == decompress("zstd", zipped.read_bytes())
    assert proxy.injected.get("truncate", 0) > 0  # resumed mid-object, bytes not repeated
    names = [p.name for p in (tmp_path / "cache").iterdir()]
    assert not [name for name in names if name.endswith(".tmp")]  # no temp file left
    assert sorted(name for name in names if not name.startswith(".")) == sorted(
        ["index.json", *handle.facts.basenames])  # and no compressed copy


def test_keep_zip_still_keeps_the_compressed_file(s3_env, bucket, tmp_path):
    name, src = bucket
    handle = open_dataset(f"s3://{name}/ds", str(tmp_path / "cache"), keep_zip=True)
    handle.preparer.prepare(0)
    zip_name = handle.facts.zip_basenames[0]
    assert (tmp_path / "cache" / zip_name).read_bytes() == (src / zip_name).read_bytes()


def test_a_corrupt_zstd_object_without_hashes_names_its_url(s3_env, bucket, tmp_path):
    name, src = bucket

    def zero(data: bytearray) -> None:
        data[len(data) // 3: len(data) // 3 + 64] = bytes(64)

    victim = _upload_corrupted(s3_env.client(), name, "czs", src, 1, zero)
    handle = open_dataset(f"s3://{name}/czs", str(tmp_path / "cache"))
    shard = handle.facts.zip_basenames.index(victim)
    # no validate_hash: the index's xxh64, checked on every download, names the bad object
    with pytest.raises(HashMismatchError, match=rf"s3://{name}/czs/{victim}"):
        handle.preparer.prepare(shard)
    names = [p.name for p in (tmp_path / "cache").iterdir()]
    assert not [name for name in names if name.endswith(".tmp")]
    assert [name for name in names if not name.startswith(".")] == ["index.json"]


def _read_all(env: dict, remote: str, local: str) -> int:
    import os

    os.environ.update(env)
    handle = open_dataset(remote, local)
    engine = CacheEngine(handle.preparer, predownload=500)
    n = read_in_order(handle, engine, np.arange(SAMPLES))
    engine.close()
    return n


@pytest.mark.slow
def test_two_processes_sharing_a_cache_dir_download_each_shard_once(s3_env, bucket,
                                                                     fault_proxy, tmp_path):
    name, src = bucket
    proxy = fault_proxy()
    env = {**s3_env.env(), "S3_ENDPOINT_URL": proxy.endpoint}
    remote, local = f"s3://{name}/ds", str(tmp_path / "shared")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=ctx) as pool:
        futures = [pool.submit(_read_all, env, remote, local) for _ in range(2)]
        assert [f.result(timeout=120) for f in futures] == [SAMPLES, SAMPLES]
    shards = sorted(p.name for p in src.iterdir() if p.name.endswith(".zstd"))
    gets = {s: proxy.count("GET", f"/{name}/ds/{s}") for s in shards}
    assert set(gets.values()) == {1}, gets


def test_a_shard_that_decodes_to_another_size_than_the_index_names_both(s3_env, bucket,
                                                                        tmp_path):
    name, _ = bucket
    handle = open_dataset(f"s3://{name}/ds", str(tmp_path / "cache"))
    real = int(handle.facts.raw_bytes[3])
    handle.facts.raw_bytes[3] = real + 1  # an index that disagrees with its shard
    with pytest.raises(ShardCorruptError, match=f"decompressed to {real} bytes, the index "
                                                f"says {real + 1}"):
        handle.preparer.prepare(3)
    names = [p.name for p in (tmp_path / "cache").iterdir()]
    assert handle.facts.basenames[3] not in names  # nothing half-published
    assert not [n for n in names if n.endswith(".tmp")]


def test_only_shards_whose_zip_lands_on_disk_reserve_room_for_it(s3_env, bucket, tmp_path):
    name, src = bucket
    streamed = open_dataset(f"s3://{name}/ds", str(tmp_path / "a"))
    kept = open_dataset(f"s3://{name}/ds", str(tmp_path / "b"), keep_zip=True)
    from_disk = open_dataset(str(src), str(tmp_path / "c"))
    assert zipless_shards(streamed.facts, [streamed.stream]).all()
    assert zipless_shards(from_disk.facts, [from_disk.stream]).all()  # decompressed in place
    assert not zipless_shards(kept.facts, [kept.stream]).any()
    foot = shard_footprint(streamed.facts, [streamed.stream])
    assert (foot.transient == LOCK_SLACK).all()  # lock files only
    assert (foot.resident == streamed.facts.raw_bytes).all()


def test_an_overridden_fetch_sees_every_shard_transfer(s3_env, bucket, tmp_path):
    from streaming.cache.prepare.preparer import ShardPreparer
    from streaming.cache.shard_facts import ShardFacts
    from streaming.format.index import read_index
    from streaming.stream import Stream

    name, src = bucket
    fetched: list[str] = []

    class Counting(Stream):
        def fetch(self, basename, dest, **kwargs):
            fetched.append(basename)
            return super().fetch(basename, dest, **kwargs)

    stream = Counting(remote=f"s3://{name}/ds", local=str(tmp_path / "cache"))
    stream.apply_defaults(download_retry=2, download_timeout=10, validate_hash=None,
                          keep_zip=False)
    facts = ShardFacts.from_indexes([read_index(stream.index_file())])
    preparer = ShardPreparer([stream], facts)
    assert not stream.streams_zip(facts.zip_basenames[0])
    assert not zipless_shards(facts, [stream]).any()  # its zips land on disk: room reserved
    raw = preparer.prepare(1)
    assert fetched == [facts.zip_basenames[1]]
    assert raw.read_bytes() == decompress("zstd", (src / facts.zip_basenames[1]).read_bytes())
