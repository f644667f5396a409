"""PlanConfig validation, defaults and fingerprint; topology errors from the planner."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.errors import PlanError
from streaming.plan import PlanConfig, StreamWeights, World, plan_node


def make(**kw) -> PlanConfig:
    return PlanConfig(np.array([10, 20, 30]), np.array([2, 1]), **kw)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"shuffle_algo": "py9"}, "shuffle_algo"),
        ({"partition_algo": "fancy"}, "partition_algo"),
        ({"batching_method": "stratified"}, "needs batch_size"),
        ({"batching_method": "zigzag", "batch_size": 2}, "batching_method"),
        ({"sampling_method": "greedy"}, "sampling_method"),
        ({"sampling_granularity": 0}, "sampling_granularity"),
        ({"num_canonical_nodes": -1}, "num_canonical_nodes"),
        ({"shuffle_seed": -5}, "shuffle_seed"),
        ({"weights": ("x", "y")}, "weights"),
    ],
)
def test_invalid_arguments(kwargs, match) -> None:
    with pytest.raises(PlanError, match=match):
        make(**kwargs)


def test_shape_errors() -> None:
    with pytest.raises(PlanError, match="sums to 2 but samples_per_shard has 3"):
        PlanConfig(np.array([1, 2, 3]), np.array([1, 1]))
    with pytest.raises(PlanError, match="negative"):
        PlanConfig(np.array([1, -2]), np.array([2]))
    with pytest.raises(PlanError, match="1-D integer"):
        PlanConfig(np.array([1.5, 2.0]), np.array([2]))


def test_defaults() -> None:
    c = make(shuffle=True)
    world = World(num_nodes=4, ranks_per_node=2)
    assert c.canonical_nodes(world) == 4
    assert c.block_size(4) == 1_000_000
    assert c.block_size(64) == 1 << 18
    assert make(shuffle=True, shuffle_algo="py1s").canonical_nodes(world) == 256
    assert make(num_canonical_nodes=3).canonical_nodes(world) == 3
    assert c.device_batch() == 1


def test_fingerprint_tracks_order_shaping_inputs() -> None:
    base = make(shuffle=True).fingerprint()
    assert base == make(shuffle=True).fingerprint()
    assert base != make(shuffle=True, shuffle_seed=1).fingerprint()
    assert base != make(shuffle=True, batch_size=4).fingerprint()
    assert base != make(shuffle=True, weights=(StreamWeights(repeat=2), StreamWeights())
                        ).fingerprint()
    other = PlanConfig(np.array([10, 20, 31]), np.array([2, 1]), shuffle=True)
    assert base != other.fingerprint()


def test_orig_partition_needs_divisible_counts() -> None:
    c = make(num_canonical_nodes=4, partition_algo="orig")
    plan_node(c, World(num_nodes=2), 0)
    plan_node(c, World(num_nodes=8), 0)
    with pytest.raises(PlanError, match=r"num_canonical_nodes=4 .* 3 data-parallel.*\[1, 2, 4"):
        plan_node(c, World(num_nodes=3), 0)
    plan_node(make(num_canonical_nodes=4), World(num_nodes=3), 0)  # relaxed accepts it


def test_bad_plan_arguments() -> None:
    c = make()
    with pytest.raises(PlanError, match="epoch"):
        plan_node(c, World(), -1)
    with pytest.raises(PlanError, match="sample_in_epoch"):
        plan_node(c, World(), 0, -3)
    with pytest.raises(PlanError, match="world"):
        plan_node(c, "world", 0)  # type: ignore[arg-type]


def test_resume_past_the_end_gives_an_empty_plan() -> None:
    plan = plan_node(make(batch_size=2), World(1, 2, 2), 0, 10_000)
    assert plan.samples_per_rank == 0 and plan.ids.shape == (2, 2, 0)
    assert plan.shard_access_order().size == 0
