"""StreamingDataset attributes and methods a reference-implementation user calls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming import MDSWriter, Stream, StreamingDataset
from streaming.errors import CacheLimitError


def _write(path: Path, count: int, start: int = 0, compression: str | None = None) -> str:
    with MDSWriter(out=str(path), columns={"id": "int", "pad": "bytes"}, size_limit=2000,
                   compression=compression) as writer:
        for i in range(start, start + count):
            writer.write({"id": i, "pad": bytes(100)})
    return str(path)


@pytest.fixture
def two_sources(tmp_path) -> tuple[str, str]:
    """Two local datasets: 20 samples with ids 0..19, 30 with ids 100..129."""
    return _write(tmp_path / "a", 20), _write(tmp_path / "b", 30, start=100)


@pytest.fixture
def remote_ds(tmp_path):
    remote = _write(tmp_path / "remote", 60, compression="zstd")
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "cache"), shuffle=True,
                          shuffle_algo="py1s", shuffle_seed=7, num_canonical_nodes=2,
                          batch_size=4, predownload=16, cache_limit="1mb")
    yield ds
    ds.close()


def test_configuration_attributes_are_resolved(remote_ds):
    ds = remote_ds
    assert ds.num_canonical_nodes == 2
    assert ds.shuffle_algo == "py1s" and ds.shuffle_seed == 7
    assert ds.shuffle_block_size == max(4_000_000 // 2, 1 << 18)
    assert ds.sampling_method == "balanced" and ds.batching_method == "random"
    assert ds.sampling_granularity == 1 and ds.partition_algo == "relaxed"
    assert ds.predownload == 16 and ds.batch_size == 4 and ds.cache_limit == "1mb"
    assert ds.num_streams == 1 and ds.num_samples == ds.size == 60


def test_default_canonical_nodes_and_block_size_are_the_resolved_values(tmp_path):
    ds = StreamingDataset(local=_write(tmp_path / "d", 10), shuffle=True)
    try:
        assert ds.num_canonical_nodes == 1 and ds.shuffle_algo == "py1e"
        assert ds.shuffle_block_size == max(4_000_000, 1 << 18)
    finally:
        ds.close()


def test_shards_and_num_shards(remote_ds):
    ds = remote_ds
    shards = ds.shards
    assert ds.num_shards == len(shards) == len(ds.samples_per_shard) > 3
    assert sum(s.samples for s in shards) == 60 == sum(len(s) for s in shards)
    first = shards[0]
    assert first.raw_data.basename == "shard.00000.mds" and first.compression == "zstd"
    assert first.zip_data.basename == "shard.00000.mds.zstd"
    assert first.get_raw_size() == first.raw_data.bytes > first.get_zip_size()
    assert first.format == "mds" and first.stream_id == 0
    assert ds.sample_offset_per_shard.tolist() == np.concatenate(
        ([0], np.cumsum(ds.samples_per_shard)[:-1])).tolist()


def test_cache_usage_and_eviction(remote_ds):
    ds = remote_ds
    start = ds.cache_usage  # the index and the cache's own records, no shard yet
    assert start >= 0
    assert ds[0]["id"] == 0 and ds[59]["id"] == 59  # fetches the first and last shard
    last = ds.num_shards - 1
    folder = Path(ds.streams[0].local_dir)
    assert (folder / "shard.00000.mds").exists()
    before = ds.cache_usage
    assert before == start + ds.shards[0].get_raw_size() + ds.shards[last].get_raw_size()
    ds.evict_shard(0)
    assert not (folder / "shard.00000.mds").exists()
    assert ds.cache_usage == before - ds.shards[0].get_raw_size()
    assert ds[1]["id"] == 1  # fetched again on demand
    ds.evict_coldest_shard()
    ds.evict_coldest_shard()
    assert not any((folder / f"shard.{k:05d}.mds").exists() for k in (0, last))
    with pytest.raises(CacheLimitError) as info:
        ds.evict_coldest_shard()
    assert isinstance(info.value, ValueError)  # as the reference raises


def test_local_only_data_is_never_evicted(tmp_path):
    ds = StreamingDataset(local=_write(tmp_path / "d", 30))
    try:
        ds.evict_shard(0)
        assert (tmp_path / "d" / "shard.00000.mds").exists()
        assert ds.cache_usage == 0
        with pytest.raises(CacheLimitError):
            ds.evict_coldest_shard()
        with pytest.raises(IndexError):
            ds.evict_shard(ds.num_shards)
    finally:
        ds.close()


def test_next_epoch_reads_and_sets(tmp_path):
    ds = StreamingDataset(local=_write(tmp_path / "d", 20), shuffle=True, shuffle_seed=3)
    try:
        assert ds.next_epoch == 0
        epoch0 = [s["id"] for s in ds]
        assert ds.next_epoch == 1
        epoch1 = [s["id"] for s in ds]
        assert epoch0 != epoch1 and ds.next_epoch == 2
        ds.next_epoch = 1
        assert ds.next_epoch == 1
        assert [s["id"] for s in ds] == epoch1
        ds.next_epoch = 0
        assert [s["id"] for s in ds] == epoch0
        with pytest.raises(ValueError):
            ds.next_epoch = -1
    finally:
        ds.close()


def test_resample_streams_counts_whole_and_partial_passes(two_sources):
    a, b = two_sources
    ds = StreamingDataset(streams=[Stream(local=a, repeat=2.5), Stream(local=b, choose=10)],
                          shuffle_seed=5)
    try:
        units, ids = ds.resample_streams(0)
        assert len(ids) == 50 + 10 == int(units.sum())
        counts = np.bincount(ids, minlength=50)
        assert sorted(set(counts[:20].tolist())) == [2, 3] and counts[:20].sum() == 50
        assert counts[20:].sum() == 10 and counts[20:].max() == 1
        # shard by shard: whole passes in row order, then the partial pass's rows sorted
        shard0 = int(ds.samples_per_shard[0])
        whole0 = int(units[0]) == shard0
        assert whole0 and ids[:shard0].tolist() == list(range(shard0))
        pos = 0
        for unit in units.tolist():
            part = ids[pos:pos + unit]
            assert np.all(np.diff(part) > 0)
            pos += unit
        units_a, ids_a = ds.resample_streams(0, stream_id=0)
        assert len(ids_a) == 50 and ids_a.max() < 20 and int(units_a.sum()) == 50
        # every id the epoch yields is one of the resampled draws
        assert sorted(s["id"] for s in ds) == sorted(
            i if i < 20 else i + 80 for i in ids.tolist())
    finally:
        ds.close()


def test_streams_get_their_resolved_weights(two_sources):
    a, b = two_sources
    first, second = Stream(local=a, proportion=3), Stream(local=b, proportion=1)
    ds = StreamingDataset(streams=[first, second], epoch_size=40)
    try:
        assert (first.choose, second.choose) == (30, 10)
        assert first.proportion == pytest.approx(0.75) and second.proportion == 0.25
        assert first.repeat == pytest.approx(1.5) and second.repeat == pytest.approx(1 / 3)
    finally:
        ds.close()
    again = StreamingDataset(streams=[first, second], epoch_size=80)  # same Stream objects
    try:
        assert (first.choose, second.choose) == (60, 20)
    finally:
        again.close()


def test_unweighted_streams_get_weights_too(two_sources):
    a, b = two_sources
    first, second = Stream(local=a), Stream(local=b)
    ds = StreamingDataset(streams=[first, second])
    try:
        assert (first.choose, second.choose) == (20, 30)
        assert (first.repeat, second.repeat) == (1.0, 1.0)
        assert first.proportion == pytest.approx(0.4)
        assert not first.weighted  # planning still sees what the user gave
    finally:
        ds.close()


def test_relative_weights_keep_their_normalised_shares(two_sources):
    a, b = two_sources
    first, second = Stream(local=a, proportion=2), Stream(local=b, proportion=1)
    ds = StreamingDataset(streams=[first, second], epoch_size=10)
    try:
        assert first.proportion == pytest.approx(2 / 3) and second.proportion == \
            pytest.approx(1 / 3)
        assert first.choose + second.choose == 10 and first.choose in (6, 7)
        assert first.repeat == pytest.approx(first.choose / 20)
    finally:
        ds.close()
