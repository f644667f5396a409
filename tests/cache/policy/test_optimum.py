"""The floor and the Belady optimum of a node's downloads (pure), on sequences small enough to
work out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.cache.policy.egress_bounds import belady_egress, floor_egress
from streaming.cache.policy.minimum_limit import Footprint
from streaming.errors import CacheLimitError

# five shards of 10 bytes cached, 5 more while one is fetched; a fetch moves 5 bytes
FOOTPRINT = Footprint.of(np.full(5, 10), np.full(5, 5), np.zeros(5, bool), np.ones(5, bool))
FETCH = np.full(5, 5)
READER = np.array([0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 3, 3, 0, 0])  # shards 0 1 2 0 1 3 0


def test_the_floor_fetches_each_shard_read_once():
    assert floor_egress([READER], FOOTPRINT, FETCH).downloads == 4
    assert floor_egress([READER], FOOTPRINT, FETCH).bytes == 20


@pytest.mark.parametrize(("limit", "downloads"), [(None, 4), (60, 4), (40, 4), (25, 5), (15, 7)])
def test_belady_evicts_the_shard_used_farthest_ahead(limit, downloads):
    # At 25 two shards fit while no third is fetched: shard 2 evicts 1 (used after 0), then
    # 1 evicts 2 (never again), then 3 evicts 1: 0 1 2 1 3. At 15 only one shard fits.
    got = belady_egress([READER], FOOTPRINT, FETCH, limit)
    assert (got.downloads, got.bytes) == (downloads, 5 * downloads)


def test_a_shard_another_reader_holds_is_never_evicted():
    # reader 1 holds shard 4 throughout: reader 0's shards share what is left
    holder = np.full(len(READER), 4)
    two = belady_egress([READER, holder], FOOTPRINT, FETCH, 40)
    one = belady_egress([READER], FOOTPRINT, FETCH, 25)
    assert two.downloads == one.downloads + 1  # shard 4 once, then as above


def test_finished_readers_release_their_shard():
    short = np.array([4, 4])  # done after two steps
    assert belady_egress([READER, short], FOOTPRINT, FETCH, 25).downloads == 6


def test_a_limit_that_cannot_hold_the_readers_shards_is_refused():
    with pytest.raises(CacheLimitError, match="cannot hold shard"):
        belady_egress([READER, np.full(len(READER), 4)], FOOTPRINT, FETCH, 20)


def test_the_shards_a_cache_starts_with_are_not_fetched_again():
    # a later epoch: shards 0 and 1 left in the cache by the one before
    held = np.array([0, 1])
    assert floor_egress([READER], FOOTPRINT, FETCH, held).downloads == 2  # 2 and 3
    # at 25, shard 2 evicts 1 (next used after 0), 1 evicts 2, 3 evicts 1: 2 1 3
    assert belady_egress([READER], FOOTPRINT, FETCH, 25, held=held).downloads == 3
    assert belady_egress([READER], FOOTPRINT, FETCH, None, held=held).downloads == 2


def test_a_held_shard_never_read_is_evicted_first():
    # shard 4 fills the room of a second shard until it goes: the epoch runs as from empty
    held = np.array([4])
    assert floor_egress([READER], FOOTPRINT, FETCH, held).downloads == 4
    assert belady_egress([READER], FOOTPRINT, FETCH, 25, held=held).downloads == 5
    assert belady_egress([READER], FOOTPRINT, FETCH, 40, held=held).downloads == 4
