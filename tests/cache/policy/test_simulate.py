"""The node cache simulation: exact on small sequences worked out by hand, never over the limit,
and refusing a limit that cannot hold the shards in use."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.policy.simulated_cache import SimulatedCache
from streaming.errors import CacheLimitError


def _cache(shards: int, limit: int | None, predownload: int = 1) -> SimulatedCache:
    size = np.full(shards, 100, np.int64)
    footprint = Footprint.of(size, np.zeros(shards, np.int64), np.zeros(shards, bool),
                             np.ones(shards, bool))
    return SimulatedCache(footprint, size // 2, limit, predownload)


def test_shards_read_again_stay_when_they_fit():
    cache = _cache(3, 200)
    got = cache.run_epoch([np.array([0, 0, 1, 1, 0, 0, 1, 1])])
    assert (got.downloads, got.bytes_downloaded, got.evictions) == (2, 100, 0)
    assert got.peak_cache_bytes == 200 and got.steps == 8
    again = cache.run_epoch([np.array([1, 0])])
    assert again.downloads == 0  # the cache carries over to the next epoch


def test_belady_evicts_the_shard_needed_last():
    cache = _cache(3, 200)
    got = cache.run_epoch([np.array([0, 1, 2, 0, 2, 1])])
    # At step 1 the prefetcher may not evict 0 (still needed, at step 3) for 2, so 2 comes
    # when reader needs it, at step 2, in place of 1 (next used at 5, the farthest); 1
    # then displaces 0 or 2, neither needed again: the Belady optimum's 4 downloads.
    assert (got.downloads, got.evictions) == (4, 2)
    assert got.fetched.tolist() == [0, 1, 2]
    assert int(got.occupancy[:, 1].max()) <= 200


def test_a_fresh_disk_downloads_again():
    cache = _cache(2, None)
    assert cache.run_epoch([np.array([0, 1])]).downloads == 2
    cache.wipe()
    assert cache.run_epoch([np.array([0, 1])]).downloads == 2


def test_a_limit_under_the_shards_in_use_is_refused():
    cache = _cache(4, 150)
    with pytest.raises(CacheLimitError, match="too small"):
        cache.run_epoch([np.array([0, 1]), np.array([2, 3])])


def test_the_no_eviction_shortcut_matches_the_stepped_simulation():
    from streaming.cache.policy.lookahead import ReaderRuns
    from streaming.cache.policy.simulated_cache import _Epoch

    rng = np.random.default_rng(3)
    sequences = [np.repeat(rng.integers(0, 30, 40), rng.integers(1, 6, 40)) for _ in range(4)]
    quick = _cache(30, None, predownload=8).run_epoch(sequences)
    stepped_cache = _cache(30, None, predownload=8)
    stepped = _Epoch(stepped_cache, [ReaderRuns.of(s, 8) for s in sequences]).run()
    assert (quick.downloads, quick.bytes_downloaded, quick.evictions, quick.peak_cache_bytes) == (
        stepped.downloads, stepped.bytes_downloaded, stepped.evictions, stepped.peak_cache_bytes)
    assert quick.fetched.tolist() == stepped.fetched.tolist()


def test_the_readers_prefetch_nearest_use_first():
    # Reader 0 reads shard 0 for 10 steps then shard 1; reader 1 shard 2 for 5 steps then
    # shard 3; room for three shards. Shard 3 (needed at step 5) is brought before shard 1
    # (step 10), which waits until shard 2 is done with. Reader by reader, shard 1 would come
    # first and then be evicted for shard 3, and be downloaded twice.
    cache = _cache(4, 300, predownload=16)
    got = cache.run_epoch([np.repeat([0, 1], [10, 5]), np.repeat([2, 3], [5, 10])])
    assert (got.downloads, got.evictions) == (4, 1)
    assert int(got.occupancy[:, 1].max()) <= 300


def test_a_prefetch_waits_while_nearer_shards_need_the_room():
    # Reader 0 reads shard 0 for 10 steps, then shard 8; reader 1 cycles through shards 1-7
    # twice; room for eight shards. At step 0 reader 1's window reaches shards 1-6 only, which
    # leaves room for shard 8 (needed at step 10), but shard 7 (needed at step 6) enters the
    # window at step 1 and would evict it, to be downloaded again. The prefetch of shard 8
    # waits until it fits beside every shard needed sooner. Nor does a prefetch evict a shard
    # still needed: each of the nine shards comes once, shard 8 in shard 0's place once
    # reader 0 is done with it (the Belady optimum's 9 downloads).
    sequences = [np.repeat([0, 8], [10, 2]), np.tile(np.arange(1, 8), 2)]
    got = _cache(9, 800).run_epoch(sequences)
    assert (got.downloads, got.evictions) == (9, 1)
    assert got.occupancy[:, 1].max() <= 800
    assert got.occupancy[got.occupancy[:, 0] == 0, 1].max() == 700  # shard 8 not brought at 0
