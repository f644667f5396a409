"""Streaming packing over a remote source under a cache_limit: every sample once, folder bounded."""

from __future__ import annotations

from pathlib import Path

from streaming.packing.streaming import PackedStreamingDataset
from tests.support.datasets import write_tokens
from tests.support.folder_size import peak_size

N = 300


def test_packing_reads_every_sample_once_within_the_cache_limit(tmp_path: Path) -> None:
    source, cache = tmp_path / "source", tmp_path / "cache"
    write_tokens(source, N, max_len=300, size_limit=1 << 13, compression="zstd")
    limit = 64 * 1024  # well under the ~180 KB of raw shards: eviction is needed
    ds = PackedStreamingDataset(remote=source.as_uri(), local=str(cache), shuffle=True,
                                packing_length=512, packs_per_batch=2, cache_limit=limit)
    assert ds.cache is not None
    with peak_size(cache) as peak:
        ids = [i for batch in ds for i in batch["sample_ids"].tolist()]
    assert sorted(ids) == list(range(N))
    assert peak[0] <= limit
    stats = ds.cache_stats()
    assert stats.evictions > 0 and stats.downloads > 0
    ds.close()


def test_scanning_lengths_not_recorded_keeps_the_cache_within_its_limit(tmp_path: Path) -> None:
    source, cache = tmp_path / "source", tmp_path / "cache"
    write_tokens(source, N, max_len=300, size_limit=1 << 13, compression="zstd", lengths=None)
    limit = 64 * 1024
    with peak_size(cache) as peak:
        ds = PackedStreamingDataset(remote=source.as_uri(), local=str(cache),
                                    shuffle=True, packing_length=512, packs_per_batch=2,
                                    cache_limit=limit)
        # The scan read each shard from a scratch copy: nothing in the cache yet.
        assert not [p.name for p in cache.rglob("*.mds")]
        ids = [i for batch in ds for i in batch["sample_ids"].tolist()]
    assert sorted(ids) == list(range(N))
    assert peak[0] <= limit
    ds.close()
