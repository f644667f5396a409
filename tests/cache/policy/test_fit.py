"""The shuffle block sized to a cache_limit (pure): how many shards stay resident, the block
that fits them, and the default kept when the cache holds a whole default block."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.cache.policy.cache_limit import CacheLimit
from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.policy.shuffle_fit import (
    BLOCK_SHUFFLES,
    PER_CANONICAL,
    SHARD_SHUFFLES,
    SPARE,
    block_for_limit,
    canonical_for_limit,
    shards_in_use,
    shards_resident,
    typical_samples,
)
from streaming.plan import PlanConfig, World, plan_node

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
    # 6 resident - SPARE = 4 wanted at once: 2 blocks' shards at a py1b block edge, + 1
    # straddling it
    assert block_for_limit(60 * MB, fp, per_shard, 1 << 18, "py1b") == 3 * 2000 // 2
    # py1e uses 1.5 blocks' worth at the ends of a node's range
    assert block_for_limit(60 * MB, fp, per_shard, 1 << 18, "py1e") == 2 * 2000
    assert block_for_limit(60 * MB, fp, per_shard, 1 << 18, "py1e", sequences=2) == 2000
    assert block_for_limit(20 * MB, fp, per_shard, 1 << 18) == 2000  # never under one shard
    assert block_for_limit(10 * 240 * MB, fp, per_shard, 1 << 18) == 1 << 18  # default fits
    assert block_for_limit(20 * MB, fp, per_shard, 500) == 500  # a smaller default is kept


def test_local_only_shards_do_not_shape_the_block():
    fp = _footprint(10, cached=False)
    assert block_for_limit(1, fp, np.full(10, 100), 4096) == 4096


def test_typical_shard_is_the_mean_of_the_cached_ones_that_give_samples():
    raw = np.array([8, 8, 8, 8, 8]) * MB
    fp = Footprint.of(raw, raw // 2, np.zeros(5, bool), np.array([True, True, True, True, False]))
    # a stretch of the order holds samples / mean pieces; shards picked nothing from do not count
    assert typical_samples(fp, np.array([100, 200, 600, 0, 9999])) == 300


@given(st.integers(1, 64), st.integers(1, 1 << 30), st.integers(1, 5000), st.integers(1, 1 << 20))
def test_the_block_never_exceeds_the_default_nor_falls_under_one_shard(shards, limit, per, default):
    fp = _footprint(shards)
    block = block_for_limit(limit, fp, np.full(shards, per), default)
    assert block <= default
    assert block >= min(per, default)
    room = shards_resident(limit, fp) - SPARE
    if block < default and block > per:
        assert shards_in_use(block, per, "py1e") <= room
        half = shards * per // 2  # py1e's cap: windows over half the sequence overlap
        assert block == half or shards_in_use(block + 2 * per, per, "py1e") > room  # not smaller


def _peak_shards_in_use(cfg: PlanConfig, world: World, per: int) -> int:
    """Most shards whose samples a node's readers have started but not finished, at once."""
    ids = plan_node(cfg, world, 0).ids[0]
    workers, batch = ids.shape[0], cfg.batch_size
    order = ids.reshape(workers, -1, batch).transpose(1, 0, 2).reshape(-1)
    n = int(cfg.samples_per_shard.sum())
    shard = order[:n] // per  # the padding repeats early samples: left out
    shards = len(cfg.samples_per_shard)
    first = np.full(shards, n)
    last = np.zeros(shards, np.int64)
    np.minimum.at(first, shard, np.arange(n))
    np.maximum.at(last, shard, np.arange(n))
    change = np.zeros(n + 1, np.int64)
    np.add.at(change, first, 1)
    np.add.at(change, last + 1, -1)
    return int(np.cumsum(change)[:n].max())


@given(st.sampled_from(BLOCK_SHUFFLES), st.integers(40, 200), st.integers(20, 120),
       st.integers(6, 60), st.sampled_from([1, 2]), st.integers(0, 1 << 16))
def test_real_plans_stay_within_the_room_the_block_was_sized_for(algo, shards, per, resident,
                                                                 canonical, seed):
    """What block_for_limit assumes about a plan holds for the plan itself: the shards readers
    use at once fit the resident room, so nothing in use is evicted and re-downloaded."""
    shards -= shards % 2
    fp = _footprint(shards)
    limit = (resident + 1) * 8 * MB + 4 * MB  # `resident` shards + the one in flight
    assert shards_resident(limit, fp) == resident
    per_shard = np.full(shards, per)
    block = block_for_limit(limit, fp, per_shard, 1 << 18, algo, sequences=canonical)
    if block <= per:
        return  # the cache holds too little to shape the block: nothing to check
    cfg = PlanConfig(per_shard, np.array([shards]), batch_size=8, shuffle=True,
                     shuffle_algo=algo, shuffle_block_size=block, shuffle_seed=seed,
                     num_canonical_nodes=canonical)
    peak = _peak_shards_in_use(cfg, World(num_nodes=1, workers_per_rank=2), per)
    assert peak <= resident - SPARE


@given(st.integers(1, 64), st.integers(1, 1 << 30), st.sampled_from(SHARD_SHUFFLES),
       st.sampled_from([1, 2, 4]))
def test_the_canonical_count_is_a_multiple_of_the_nodes_within_the_default(shards, limit, algo,
                                                                          nodes):
    fp = _footprint(shards)
    fit = canonical_for_limit(limit, fp, 64 * nodes, nodes, algo)
    assert nodes <= fit <= 64 * nodes and fit % nodes == 0
    room = shards_resident(limit, fp) - SPARE
    if room >= shards:
        assert fit == 64 * nodes  # the cache holds every shard: the default stays
    elif fit > nodes:
        assert (fit // nodes) * PER_CANONICAL[algo] <= room - 1


@given(st.sampled_from(SHARD_SHUFFLES), st.integers(40, 200), st.integers(20, 120),
       st.integers(6, 60), st.integers(0, 1 << 16))
def test_real_shard_shuffles_stay_within_the_room_their_canonical_count_was_sized_for(
        algo, shards, per, resident, seed):
    """py1s/py2s plans with the canonical node count canonical_for_limit picks keep no more
    shards in use at once than the cache has room for."""
    fp = _footprint(shards)
    limit = (resident + 1) * 8 * MB + 4 * MB
    per_shard = np.full(shards, per)
    canonical = canonical_for_limit(limit, fp, 64, 1, algo)
    if canonical == 64:
        return  # everything fits: nothing to check
    cfg = PlanConfig(per_shard, np.array([shards]), batch_size=8, shuffle=True,
                     shuffle_algo=algo, shuffle_seed=seed, num_canonical_nodes=canonical)
    peak = _peak_shards_in_use(cfg, World(num_nodes=1, workers_per_rank=2), per)
    assert peak <= resident - SPARE, (canonical, peak)


def _node_minimum(cfg: PlanConfig, world: World, fp: Footprint) -> int:
    from streaming.cache.policy.minimum_limit import minimum_limit

    worst = 0
    for node in range(world.num_nodes):
        plan = plan_node(cfg, world.with_position(node), 0)
        found = minimum_limit(plan.ids, fp, cfg.shard_offsets, plan.batch_size)
        worst = max(worst, found.bytes)
    return worst


@pytest.mark.parametrize("algo", ["py1e", "py1b", "py1s"])
@pytest.mark.parametrize("method", ["random", "stratified"])
@pytest.mark.parametrize(("streams", "share"), [(1, 0.3), (2, 1.0), (2, 2.0)])
@pytest.mark.parametrize("samples", [300, 20])
def test_every_limit_at_or_above_the_minimum_fits_the_plan_it_shapes(algo, method, streams,
                                                                    share, samples):
    """The minimum is the plan's at the smallest limit; a larger limit fits a larger block (or
    more canonical nodes), and that plan must still run within it, so the dataset never refuses
    a limit `streaming plan` states is enough (shards of `samples` samples: a step of 4 ranks'
    batches spans shards when they are small)."""
    import warnings

    from streaming.cache.policy.plan_fit import fit_plan
    from streaming.plan.mixing import StreamWeights

    rng = np.random.default_rng(7)
    per = np.full(30 * streams, samples)
    per[::7] = samples * 5 // 6
    raw = rng.integers(200_000, 260_000, len(per))
    fp = Footprint.of(raw, raw // 3, np.zeros(len(per), bool), np.ones(len(per), bool))
    weights = (StreamWeights(proportion=0.7), StreamWeights(proportion=0.3)) if streams == 2 \
        else ()
    cfg = PlanConfig(per, np.full(streams, 30), weights=weights, batch_size=8, shuffle=True,
                     epoch_size=int(per.sum() * share), shuffle_algo=algo,
                     batching_method=method)
    world = World(num_nodes=2, ranks_per_node=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        least = _node_minimum(fit_plan(cfg, world, fp, CacheLimit.parse(1)).config, world, fp)
        for factor in (1.0, 1.1, 1.5, 2.0, 3.0):
            limit = int(least * factor)
            fitted = fit_plan(cfg, world, fp, CacheLimit.parse(limit)).config
            assert _node_minimum(fitted, world, fp) <= limit
