"""The shuffle block sized to a cache_limit (pure): how many shards stay resident, the block
that fits them, and the default kept when the cache holds a whole default block."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streaming.cache.fit import SPARE, block_for_limit, shards_resident, typical_samples
from streaming.cache.limit import Footprint

MB = 1 << 20


def _footprint(shards: int, raw: int = 8 * MB, zipped: int = 4 * MB, cached: bool = True
               ) -> Footprint:
    return Footprint.of(np.full(shards, raw), np.full(shards, zipped), np.zeros(shards, bool),
                        np.full(shards, cached), slack=0)


def test_resident_shards_leave_room_for_one_being_prepared():
    fp = _footprint(30)
    assert shards_resident(12 * MB, fp) == 0  # only the one in flight fits
    assert shards_resident(20 * MB, fp) == 1
    assert shards_resident(60 * MB, fp) == 6  # (60 - 12) // 8


def test_the_block_holds_the_resident_shards_but_spare():
    fp = _footprint(30)
    per_shard = np.full(30, 2000)
    assert block_for_limit(60 * MB, fp, per_shard, 1 << 18) == (6 - SPARE) * 2000
    assert block_for_limit(20 * MB, fp, per_shard, 1 << 18) == 2000  # never under one shard
    assert block_for_limit(10 * 240 * MB, fp, per_shard, 1 << 18) == 1 << 18  # default fits
    assert block_for_limit(20 * MB, fp, per_shard, 500) == 500  # a smaller default is kept


def test_local_only_shards_do_not_shape_the_block():
    fp = _footprint(10, cached=False)
    assert block_for_limit(1, fp, np.full(10, 100), 4096) == 4096


def test_typical_shard_is_the_median_of_the_cached_ones():
    raw = np.array([8, 8, 8, 8]) * MB
    fp = Footprint.of(raw, raw // 2, np.zeros(4, bool), np.array([True, True, True, False]))
    assert typical_samples(fp, np.array([100, 300, 200, 9999])) == 200


@given(st.integers(1, 64), st.integers(1, 1 << 30), st.integers(1, 5000), st.integers(1, 1 << 20))
def test_the_block_never_exceeds_the_default_nor_falls_under_one_shard(shards, limit, per, default):
    fp = _footprint(shards)
    block = block_for_limit(limit, fp, np.full(shards, per), default)
    assert block <= default
    assert block >= min(per, default)
    resident = shards_resident(limit, fp)
    if block < default:
        assert block == max(resident - SPARE, 1) * per
