"""A cache_limit sizes the default shuffle block (py1s/py2s: the canonical node count) so each
shard is downloaded about once per epoch, also with more shards than the cache holds a block of
(a folder serves as the remote)."""

from __future__ import annotations

import numpy as np
import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.format.index import read_index
from tests.support.datasets import MANY_SHARDS_SAMPLES as SAMPLES


@pytest.mark.parametrize("algo", ["py1e", "py1b", "py1br", "py1s", "py2s"])
def test_a_quarter_limit_downloads_each_shard_about_once(many_shards, tmp_path, algo, caplog):
    index = read_index(many_shards / "index.json")
    shards = len(index.shards)
    limit = int(np.sum(index.raw_bytes)) // 4
    ds = StreamingDataset(remote=str(many_shards), local=str(tmp_path / "cache"), cache_limit=limit,
                          batch_size=32, shuffle=True, shuffle_algo=algo, predownload=64)
    try:
        loader = StreamingDataLoader(ds, batch_size=32, num_workers=2)
        seen = [i for batch in loader for i in batch["id"].tolist()]
        stats = ds.cache_stats()
    finally:
        ds.close()
    assert sorted(set(seen)) == list(range(SAMPLES))
    assert stats.evictions > 0, stats
    # Measured 1.05-1.25x here (the last batch's padding repeats samples from the epoch's
    # start; prefetching runs ahead of need). Blocks sized to one block's worth of shards
    # fetched 1.2-2.1x; the whole-epoch default block, 5-6x. py1s/py2s with their default 64
    # canonical nodes, more than the cache holds shards for: 2.1x, and 14x with reads sized to
    # half a shard.
    assert stats.downloads <= shards * 1.3, (shards, stats)
    fitted = "interleaves" if algo in ("py1s", "py2s") else "holds only part of a shuffle block"
    assert fitted in caplog.text  # the user is told the shuffle was fitted to the cache


def test_a_users_own_canonical_count_is_kept_and_warned_about(many_shards, tmp_path, caplog):
    index = read_index(many_shards / "index.json")
    limit = int(np.sum(index.raw_bytes)) // 4
    ds = StreamingDataset(remote=str(many_shards), local=str(tmp_path / "cache"), cache_limit=limit,
                          batch_size=32, shuffle=True, shuffle_algo="py1s",
                          num_canonical_nodes=64)
    try:
        assert ds.config.num_canonical_nodes == 64
        assert ds._read_size(32).rows > 1024  # large reads: each pins a shard once
    finally:
        ds.close()
    assert "num_canonical_nodes=64 with shuffle_algo='py1s'" in caplog.text
