"""Each algorithm's record says what the algorithm does: the registries list every module, and
the traits that config, planning and cache fitting read match the algorithms' behaviour."""

from __future__ import annotations

import pkgutil
import warnings

import numpy as np
import pytest

import streaming.plan.batching as batching_pkg
import streaming.plan.partition as partition_pkg
import streaming.plan.shuffle as shuffle_pkg
from streaming.cache.policy import shuffle_fit as fit
from streaming.errors import PlanError
from streaming.plan import PlanConfig, World, global_order
from streaming.plan.batching import BATCHINGS, get_method
from streaming.plan.partition import PARTITIONS, partition_scheme
from streaming.plan.shuffle import SHUFFLES, shuffle_algorithm

HELPERS = {"pieces", "sequence"}


def _modules(package) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(package.__path__)} - HELPERS


@pytest.mark.parametrize(("package", "registry", "attr"), [
    (shuffle_pkg, SHUFFLES, "ALGORITHM"),
    (partition_pkg, PARTITIONS, "SCHEME"),
    (batching_pkg, BATCHINGS, "METHOD"),
])
def test_registry_lists_every_module_under_its_name(package, registry, attr) -> None:
    assert set(registry) == _modules(package)
    for name, record in registry.items():
        assert record.name == name
        assert getattr(getattr(package, name), attr) is record


def test_unknown_names_are_refused() -> None:
    with pytest.raises(PlanError, match="shuffle_algo 'py3'"):
        shuffle_algorithm("py3")
    with pytest.raises(PlanError, match="partition_algo 'loose'"):
        partition_scheme("loose")
    with pytest.raises(PlanError, match=r"batching_method 'mixed' is unknown.*'random'"):
        get_method("mixed")


def _shuffled(algo: str, block: int) -> np.ndarray:
    lengths = [37, 80, 5, 64, 120, 33, 90, 71]
    bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    values = np.arange(bounds[-1], dtype=np.int64)
    return SHUFFLES[algo].shuffle(values, bounds, np.random.default_rng(7), block)


@pytest.mark.parametrize("algo", list(SHUFFLES))
def test_block_based_is_whether_the_block_size_changes_the_order(algo) -> None:
    changes = not np.array_equal(_shuffled(algo, 16), _shuffled(algo, 200))
    assert changes == SHUFFLES[algo].block_based


@pytest.mark.parametrize("algo", list(SHUFFLES))
def test_shard_aware_shuffles_keep_canonical_nodes_apart(algo) -> None:
    """A shard-aware shuffle reorders within a canonical node; the other mixes them all."""
    sizes = np.full(8, 10)
    cfg = PlanConfig(sizes, np.array([8]), shuffle=True, shuffle_algo=algo,
                     num_canonical_nodes=2)
    assert cfg.shard_aware == SHUFFLES[algo].shard_aware
    shards = global_order(cfg, 0) // 10
    apart = set(shards[0::2].tolist()).isdisjoint(shards[1::2].tolist())
    assert apart == SHUFFLES[algo].shard_aware


@pytest.mark.parametrize("algo", list(SHUFFLES))
def test_default_canonical_nodes_scale_by_the_trait(algo) -> None:
    cfg = PlanConfig(np.full(4, 10), np.array([4]), shuffle=True, shuffle_algo=algo)
    world = World(num_nodes=3)
    assert cfg.canonical_nodes(world) == 3 * SHUFFLES[algo].canonical_per_node
    unshuffled = PlanConfig(np.full(4, 10), np.array([4]), shuffle_algo=algo)
    assert unshuffled.canonical_nodes(world) == 3


def test_cache_fitting_reads_the_traits() -> None:
    assert set(fit.BLOCK_SHUFFLES) == {n for n, a in SHUFFLES.items() if a.block_based}
    assert set(fit.SHARD_SHUFFLES) == {n for n, a in SHUFFLES.items() if a.shards_per_canonical}
    assert not set(fit.BLOCK_SHUFFLES) & set(fit.SHARD_SHUFFLES)
    for name in fit.BLOCK_SHUFFLES:
        assert fit.SPREAD[name] == SHUFFLES[name].block_spread >= 1
    for name in fit.SHARD_SHUFFLES:
        assert fit.PER_CANONICAL[name] == SHUFFLES[name].shards_per_canonical >= 1


def test_centred_windows_warn_for_a_block_under_a_shard() -> None:
    for name, algo in SHUFFLES.items():
        cfg = PlanConfig(np.full(4, 100), np.array([4]), shuffle=True, shuffle_algo=name,
                         shuffle_block_size=10)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            global_order(cfg, 0)
        small = [w for w in caught if "smaller than the largest shard" in str(w.message)]
        assert bool(small) == algo.centred_windows


@pytest.mark.parametrize("name", list(PARTITIONS))
def test_any_node_count_is_whether_odd_topologies_pass(name) -> None:
    scheme = PARTITIONS[name]
    scheme.check(4, 2)  # divisible topologies work everywhere
    if scheme.any_node_count:
        scheme.check(4, 3)
    else:
        with pytest.raises(PlanError):
            scheme.check(4, 3)


@pytest.mark.parametrize("name", list(BATCHINGS))
def test_needs_batch_size_is_enforced(name) -> None:
    method = BATCHINGS[name]
    if method.needs_batch_size:
        with pytest.raises(PlanError, match="needs batch_size"):
            PlanConfig(np.full(4, 10), np.array([4]), batching_method=name)
    else:
        PlanConfig(np.full(4, 10), np.array([4]), batching_method=name)


@pytest.mark.parametrize("name", list(BATCHINGS))
def test_batch_aligned_resume_rounds_the_position_down(name) -> None:
    cfg = PlanConfig(np.full(4, 10), np.array([4]), batching_method=name, batch_size=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = global_order(cfg, 0, sample_in_epoch=6)
    rounded = [w for w in caught if "rounded down to 4" in str(w.message)]
    assert bool(rounded) == BATCHINGS[name].batch_aligned_resume
    full = global_order(cfg, 0)
    start = 4 if BATCHINGS[name].batch_aligned_resume else 6
    assert np.array_equal(ids, full[start:])
