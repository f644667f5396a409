"""The planning fit alone (pure: no shared memory, no files): a config, a world, shard
footprints and a cache limit in; the config to plan with, the read sizing and the warnings out."""

from __future__ import annotations

import re

import numpy as np

from streaming.cache.policy.cache_limit import CacheLimit
from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.policy.plan_fit import PlanFit, fit_plan
from streaming.cache.policy.shuffle_fit import block_for_limit, canonical_for_limit
from streaming.plan import PlanConfig, World
from streaming.read.sizing import MAX_READ, READ_BYTES, rows_per_read

MB = 1 << 20
SHARDS, PER_SHARD = 40, 2000


def _config(**options) -> PlanConfig:
    return PlanConfig(samples_per_shard=np.full(SHARDS, PER_SHARD, np.int64),
                      shards_per_stream=np.array([SHARDS], np.int64), **options)


def _footprint(cached: bool = True) -> Footprint:
    return Footprint.of(np.full(SHARDS, 8 * MB), np.full(SHARDS, 4 * MB), np.zeros(SHARDS, bool),
                        np.full(SHARDS, cached), slack=0)


def _assert_no_measurements(fit: PlanFit) -> None:
    for message in fit.warnings:
        assert not re.search(r"\d(\.\d+)?x\b", message), message  # no benchmark ratios


def test_no_limit_keeps_the_config_and_large_reads():
    cfg = _config(shuffle=True)
    assert fit_plan(cfg, World(), _footprint(), None) == PlanFit(cfg, 0, ())
    assert fit_plan(cfg, World(), None, CacheLimit.parse("1gb")) == PlanFit(cfg, 0, ())


def test_an_unshuffled_plan_keeps_its_config_and_reads_half_shards():
    cfg = _config()
    fit = fit_plan(cfg, World(), _footprint(), CacheLimit.parse(60 * MB))
    assert fit == PlanFit(cfg, PER_SHARD, ())


def test_an_unset_block_is_fitted_to_the_limit_with_a_warning():
    cfg = _config(shuffle=True, shuffle_algo="py1b")
    world = World()
    default = cfg.block_size(cfg.canonical_nodes(world))
    fit = fit_plan(cfg, world, _footprint(), CacheLimit.parse("60mb"))
    span = world.ranks_per_node * cfg.device_batch()  # a step of the node's ranks
    expected = block_for_limit(60 * MB, _footprint(), cfg.samples_per_shard, default, "py1b",
                               span=span)
    assert expected < default
    assert fit.config.shuffle_block_size == expected and fit.read_shard == PER_SHARD
    assert len(fit.warnings) == 1 and "cache_limit=60mb" in fit.warnings[0]
    _assert_no_measurements(fit)
    assert cfg.shuffle_block_size is None  # the input config is left alone


def test_a_block_the_user_set_is_kept_with_large_reads_and_a_warning():
    cfg = _config(shuffle=True, shuffle_block_size=1 << 18)
    fit = fit_plan(cfg, World(), _footprint(), CacheLimit.parse(60 * MB))
    assert fit.config is cfg and fit.read_shard == 0
    assert len(fit.warnings) == 1 and "shuffle_block_size=262144" in fit.warnings[0]
    _assert_no_measurements(fit)
    small = _config(shuffle=True, shuffle_block_size=PER_SHARD)
    fit = fit_plan(small, World(), _footprint(), CacheLimit.parse(60 * MB))
    assert fit == PlanFit(small, PER_SHARD, ())


def test_shard_shuffles_interleave_fewer_canonical_nodes():
    cfg = _config(shuffle=True, shuffle_algo="py1s")
    world = World(num_nodes=2)
    default = cfg.canonical_nodes(world)
    fit = fit_plan(cfg, world, _footprint(), CacheLimit.parse(60 * MB))
    expected = canonical_for_limit(60 * MB, _footprint(), default, 2, "py1s")
    assert expected < default and expected % 2 == 0
    assert fit.config.num_canonical_nodes == expected and len(fit.warnings) == 1
    _assert_no_measurements(fit)
    given = _config(shuffle=True, shuffle_algo="py2s", num_canonical_nodes=64)
    kept = fit_plan(given, world, _footprint(), CacheLimit.parse(60 * MB))
    assert kept.config is given and kept.read_shard == 0 and "64" in kept.warnings[0]
    _assert_no_measurements(kept)


def test_the_naive_shuffle_and_local_only_shards_are_left_alone():
    naive = _config(shuffle=True, shuffle_algo="naive")
    fit = fit_plan(naive, World(), _footprint(), CacheLimit.parse(60 * MB))
    assert fit == PlanFit(naive, 0, ())
    cfg = _config(shuffle=True)
    local = fit_plan(cfg, World(), _footprint(cached=False), CacheLimit.parse(60 * MB))
    assert local.config == cfg and not local.warnings


def test_reads_are_sized_to_half_a_shard_per_reader_under_a_fitting_limit():
    mean = 1000.0
    assert rows_per_read(mean, 32, pinned=False, read_shard=PER_SHARD, readers=4) == \
        rows_per_read(mean, 32)
    assert rows_per_read(mean, 32, pinned=True, read_shard=0, readers=4) == \
        READ_BYTES // 1000 // 32 * 32 > MAX_READ  # the cap lifted: one read pins a shard once
    rows = rows_per_read(mean, 10, pinned=True, read_shard=PER_SHARD, readers=4)
    assert rows == PER_SHARD // 8 // 10 * 10
    assert rows_per_read(mean, 512, pinned=True, read_shard=PER_SHARD, readers=4) == 512


def _decoded(parquet: int = SHARDS, mb: int = 4) -> Footprint:
    """Shards decoded whole (Parquet row groups of `mb` MiB) first, `parquet` of them; the rest
    read row by row (MDS)."""
    resident = np.where(np.arange(SHARDS) < parquet, mb * MB, 0).astype(np.int64)
    return Footprint(resident, np.zeros(SHARDS, np.int64))


def test_a_block_spanning_more_row_groups_than_stay_decoded_is_narrowed():
    cfg = _config(shuffle=True, shuffle_algo="py1e")
    fit = fit_plan(cfg, World(), None, None, decoded=_decoded(), decoded_room=64 * MB)
    block = fit.config.shuffle_block_size
    # half the room (Arrow may hold twice the recorded size), less the spare, over the spread
    assert block == block_for_limit(32 * MB, _decoded(), cfg.epoch_samples_per_shard,
                                    cfg.block_size(1), "py1e", typical=PER_SHARD,
                                    span=World().ranks_per_node * cfg.device_batch())
    assert PER_SHARD <= block < SHARDS * PER_SHARD
    (message,) = fit.warnings
    assert "STREAMING_PARQUET_DECODED_BYTES" in message and f"blocks of {block}" in message
    _assert_no_measurements(fit)


def test_a_room_holding_every_row_group_keeps_the_config():
    cfg = _config(shuffle=True, shuffle_algo="py1e")
    assert fit_plan(cfg, World(), None, None, decoded=_decoded(),
                    decoded_room=1024 * MB) == PlanFit(cfg, 0, ())


def test_shards_read_row_by_row_do_not_narrow_anything():
    cfg = _config(shuffle=True, shuffle_algo="py1e")
    assert fit_plan(cfg, World(), None, None, decoded=_decoded(parquet=0),
                    decoded_room=MB) == PlanFit(cfg, 0, ())
    unshuffled = _config()
    assert fit_plan(unshuffled, World(), None, None, decoded=_decoded(),
                    decoded_room=MB) == PlanFit(unshuffled, 0, ())


def test_a_block_the_user_set_is_kept_with_a_warning_naming_it():
    cfg = _config(shuffle=True, shuffle_algo="py1br", shuffle_block_size=SHARDS * PER_SHARD)
    fit = fit_plan(cfg, World(), None, None, decoded=_decoded(), decoded_room=64 * MB)
    assert fit.config == cfg
    (message,) = fit.warnings
    assert message.startswith(f"shuffle_block_size={SHARDS * PER_SHARD} spans more row groups")


def test_the_cache_fit_and_the_decoding_fit_take_the_smaller_block():
    cfg = _config(shuffle=True, shuffle_algo="py1e")
    world = World()
    cache_only = fit_plan(cfg, world, _footprint(), CacheLimit.parse(200 * MB))
    both = fit_plan(cfg, world, _footprint(), CacheLimit.parse(200 * MB),
                    decoded=_decoded(), decoded_room=32 * MB)
    assert both.config.shuffle_block_size < cache_only.config.shuffle_block_size
    assert len(both.warnings) == len(cache_only.warnings) + 1
    roomy = fit_plan(cfg, world, _footprint(), CacheLimit.parse(200 * MB),
                     decoded=_decoded(), decoded_room=4096 * MB)
    assert (roomy.config.shuffle_block_size, roomy.read_shard, roomy.warnings) == (
        cache_only.config.shuffle_block_size, cache_only.read_shard, cache_only.warnings)


def test_shard_shuffles_interleave_fewer_canonical_nodes_to_keep_row_groups_decoded():
    cfg = _config(shuffle=True, shuffle_algo="py1s", num_canonical_nodes=None)
    world = World(num_nodes=2, ranks_per_node=8)
    fit = fit_plan(cfg, world, None, None, decoded=_decoded(mb=64), decoded_room=512 * MB)
    assert fit.config.num_canonical_nodes is not None
    assert fit.config.num_canonical_nodes < cfg.canonical_nodes(world)
    assert fit.config.num_canonical_nodes % world.num_groups == 0
    assert "canonical nodes" in fit.warnings[0]
