"""The plan follows the reference implementation's documented semantics (docs/from-reference.md):
padding only where ranks need equal counts, exact epoch_size splits, whole passes over repeated
samples, fixed unshuffled orders, fixed stratified batch composition, per_stream batch counts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from streaming.errors import PlanError
from streaming.plan import PlanConfig, StreamWeights, World, global_order, plan_node
from streaming.plan.mixing import stream_targets


def rank_ids(cfg: PlanConfig, world: World, epoch: int = 0, start: int = 0) -> list[np.ndarray]:
    """Each data-parallel rank's samples in the order its DataLoader batches them."""
    out = []
    for node in range(world.num_nodes):
        plan = plan_node(cfg, world.with_position(node), epoch, start)
        b = plan.batch_size
        for r in range(world.ranks_per_node):
            rows = plan.ids[r]
            batches = [rows[k % world.workers_per_rank, (k // world.workers_per_rank) * b:
                            (k // world.workers_per_rank + 1) * b]
                       for k in range(-(-rows.shape[1] * world.workers_per_rank // b))]
            seq = np.concatenate(batches) if batches else np.empty(0, np.int64)
            out.append(seq[seq >= 0])
    return out


def stream_of(cfg: PlanConfig, ids: np.ndarray) -> np.ndarray:
    return np.searchsorted(cfg.stream_offsets, ids, side="right") - 1


# ----- item 1: padding ----------------------------------------------------------------------

def test_one_rank_sees_every_sample_once_and_a_partial_last_batch() -> None:
    cfg = PlanConfig(np.array([117]), np.array([1]), batch_size=4)
    (ids,) = rank_ids(cfg, World())
    assert ids.tolist() == list(range(117))
    plan = plan_node(cfg, World(), 0)
    assert plan.samples_per_rank == 117
    worker = plan.worker_ids(0, 0)
    assert worker[:117].tolist() == list(range(117)) and np.all(worker[117:] == -1)
    assert len(worker) == 120  # 29 full batches and one of a single sample (drop_last drops it)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [1, 3])
def test_one_rank_never_repeats_with_canonical_nodes_and_epoch_size(shuffle, workers) -> None:
    cfg = PlanConfig(np.array([50] * 6), np.array([6]), epoch_size=200, num_canonical_nodes=8,
                     batch_size=4, shuffle=shuffle)
    (ids,) = rank_ids(cfg, World(workers_per_rank=workers))
    assert len(ids) == 200 and len(np.unique(ids)) == 200
    cfg = PlanConfig(np.array([117]), np.array([1]), num_canonical_nodes=8, batch_size=4,
                     shuffle=shuffle)
    (ids,) = rank_ids(cfg, World(workers_per_rank=workers))
    assert sorted(ids.tolist()) == list(range(117))


def test_fixed_sampling_draws_the_same_samples_every_epoch_on_one_rank() -> None:
    cfg = PlanConfig(np.array([40, 37]), np.array([2]), epoch_size=53, shuffle=True,
                     sampling_method="fixed", batch_size=4, num_canonical_nodes=3)
    sets = [set(rank_ids(cfg, World(), e)[0].tolist()) for e in range(3)]
    assert len(sets[0]) == 53 and sets[0] == sets[1] == sets[2]


def test_several_ranks_pad_only_to_equal_counts() -> None:
    cfg = PlanConfig(np.array([117]), np.array([1]), batch_size=4)
    ranks = rank_ids(cfg, World(ranks_per_node=8))
    assert {len(r) for r in ranks} == {15}  # 120 = 117 + 3, as the reference pads
    everything = np.concatenate(ranks)
    assert set(everything.tolist()) == set(range(117))
    assert all(len(np.unique(r)) == len(r) for r in ranks)  # no rank sees a sample twice


def test_several_ranks_without_a_remainder_are_not_padded() -> None:
    cfg = PlanConfig(np.array([120]), np.array([1]), batch_size=7)
    ranks = rank_ids(cfg, World(num_nodes=2, ranks_per_node=4, workers_per_rank=2))
    assert sorted(np.concatenate(ranks).tolist()) == list(range(120))


def test_ranks_interleave_like_the_reference() -> None:
    # Rank r of node n takes global positions j * ranks + r * nodes + n (the reference's order).
    cfg = PlanConfig(np.array([48]), np.array([1]), batch_size=2, num_canonical_nodes=2)
    ranks = rank_ids(cfg, World(num_nodes=2, ranks_per_node=3))
    order = global_order(cfg, 0, World(num_nodes=2, ranks_per_node=3))
    for node in range(2):
        for r in range(3):
            assert ranks[node * 3 + r].tolist() == order[r * 2 + node::6].tolist()


# ----- item 3: exact epoch_size splits ------------------------------------------------------

def test_epoch_size_split_is_exact_largest_remainder() -> None:
    sizes = np.array([200, 300])
    assert stream_targets(sizes, (), 200, 0).tolist() == [80, 120]
    props = tuple(StreamWeights(proportion=p) for p in (0.1, 0.2, 0.7))
    assert stream_targets(np.array([10, 10, 10]), props, 10, 0).tolist() == [1, 2, 7]
    thirds = tuple(StreamWeights(proportion=1) for _ in range(3))
    assert stream_targets(np.array([9, 9, 9]), thirds, 10, 5).tolist() == [4, 3, 3]
    big = tuple(StreamWeights(proportion=p) for p in (1 / 3, 2 / 3))
    for seed in range(5):
        assert stream_targets(np.array([100, 100]), big, 100, seed).tolist() == [33, 67]


# ----- item 4: whole passes over repeated samples -------------------------------------------

def test_unshuffled_repeats_are_whole_passes() -> None:
    cfg = PlanConfig(np.array([2]), np.array([1]), weights=(StreamWeights(repeat=2),))
    assert global_order(cfg, 0).tolist() == [0, 1, 0, 1]
    cfg = PlanConfig(np.array([3, 2]), np.array([2]), weights=(StreamWeights(repeat=2.5),))
    ids = global_order(cfg, 0).tolist()
    first = ids.index(3)
    assert ids[:6] == [0, 1, 2, 0, 1, 2] and ids[first:first + 4] == [3, 4, 3, 4]


def test_unshuffled_canonical_rows_cut_like_the_reference() -> None:
    # 10 samples over 4 canonical nodes: rows [0,2), [2,5), [5,7), [7,10) interleaved.
    cfg = PlanConfig(np.array([10]), np.array([1]), num_canonical_nodes=4)
    assert global_order(cfg, 0).tolist() == [0, 2, 5, 7, 1, 3, 6, 8, 4, 9]


# ----- item 5: unshuffled per_stream / device_per_stream orders are fixed -------------------

@pytest.mark.parametrize("method", ["per_stream", "device_per_stream"])
def test_unshuffled_stream_batching_repeats_its_order(method) -> None:
    cfg = PlanConfig(np.array([40, 40, 30]), np.array([2, 1]), batch_size=4,
                     batching_method=method)
    world = World(ranks_per_node=2)
    orders = [global_order(cfg, e, world) for e in range(3)]
    assert np.array_equal(orders[0], orders[1]) and np.array_equal(orders[1], orders[2])
    shuffled = PlanConfig(np.array([40, 40, 30]), np.array([2, 1]), batch_size=4,
                          batching_method=method, shuffle=True)
    assert not np.array_equal(global_order(shuffled, 0, world), global_order(shuffled, 1, world))


# ----- item 6: stratified batches have a fixed composition ----------------------------------

def test_stratified_composition_is_fixed_and_ends_with_the_smallest_stream() -> None:
    cfg = PlanConfig(np.array([70, 30]), np.array([1, 1]), batch_size=3,
                     batching_method="stratified", shuffle=True)
    world = World(ranks_per_node=2)
    ids = global_order(cfg, 0, world)
    rows = ids.reshape(-1, 6)
    per_batch = np.stack([np.bincount(stream_of(cfg, r), minlength=2) for r in rows])
    # 6 x 0.7 = 4.2 -> 4, 6 x 0.3 = 1.8 -> 1, the one left over to the larger remainder.
    assert np.all(per_batch == [4, 2])
    assert len(rows) == min(70 // 4, 30 // 2) == 15
    assert len(np.unique(ids)) == len(ids)


def test_stratified_refuses_a_stream_too_small_for_every_batch() -> None:
    cfg = PlanConfig(np.array([990, 10]), np.array([1, 1]), batch_size=4,
                     batching_method="stratified")
    with pytest.raises(PlanError, match="stream 1"):
        global_order(cfg, 0, World(ranks_per_node=2))


# ----- item 7: per_stream batch counts ------------------------------------------------------

@pytest.mark.parametrize("batch,expected", [(4, 125), (7, 70)])
def test_per_stream_keeps_each_streams_full_global_batches(batch, expected) -> None:
    cfg = PlanConfig(np.array([300, 200]), np.array([1, 1]), batch_size=batch,
                     batching_method="per_stream", shuffle=True)
    world = World()
    ids = global_order(cfg, 0, world)
    assert len(ids) == expected * batch
    assert len(np.unique(ids)) == len(ids)
    counts = {len(r) for r in rank_ids(cfg, World(ranks_per_node=1, workers_per_rank=2))}
    assert counts == {expected * batch}


def test_per_stream_counts_are_identical_across_ranks() -> None:
    cfg = PlanConfig(np.array([301, 203]), np.array([1, 1]), batch_size=3,
                     batching_method="per_stream", num_canonical_nodes=2)
    world = World(num_nodes=2, ranks_per_node=2, workers_per_rank=2)
    lengths = {len(r) for r in rank_ids(cfg, world)}
    assert lengths == {(301 // 12 + 203 // 12) * 3}


# ----- warnings -----------------------------------------------------------------------------

def test_warns_when_the_epoch_is_smaller_than_its_canonical_nodes() -> None:
    cfg = PlanConfig(np.array([5]), np.array([1]), num_canonical_nodes=8)
    with pytest.warns(UserWarning, match="canonical nodes"):
        global_order(cfg, 0)


def test_warns_when_a_py1e_block_is_smaller_than_a_shard() -> None:
    cfg = PlanConfig(np.array([50, 50]), np.array([2]), shuffle=True, shuffle_block_size=10)
    with pytest.warns(UserWarning, match="shuffle_block_size=10"):
        global_order(cfg, 0)
    quiet = PlanConfig(np.array([50, 50]), np.array([2]), shuffle=True, shuffle_block_size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        global_order(quiet, 0)


def test_resuming_with_several_workers_needs_a_batch_size() -> None:
    cfg = PlanConfig(np.array([50]), np.array([1]))
    with pytest.raises(PlanError, match="batch_size"):
        plan_node(cfg, World(workers_per_rank=2), 0, 10)
    plan_node(cfg, World(workers_per_rank=2), 0)
    plan_node(cfg, World(), 0, 10)
