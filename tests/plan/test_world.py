"""World topology arithmetic, replication groups, and reading it from the environment."""

from __future__ import annotations

import pytest

from streaming.errors import PlanError
from streaming.plan import World


def test_properties() -> None:
    w = World(num_nodes=2, ranks_per_node=4, workers_per_rank=3, node=1, rank_in_node=2,
              worker=1, replication=2)
    assert (w.world_size, w.rank, w.data_parallel_ranks, w.data_parallel_rank) == (8, 6, 4, 3)
    assert (w.num_groups, w.group_ranks, w.group) == (2, 2, 1)


def test_replication_across_nodes() -> None:
    w = World(num_nodes=4, ranks_per_node=2, node=3, replication=4)
    assert (w.data_parallel_ranks, w.num_groups, w.group_ranks, w.group) == (2, 2, 1, 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_nodes": 0}, "num_nodes"),
        ({"node": 2, "num_nodes": 2}, "node=2"),
        ({"worker": -1}, "worker"),
        ({"ranks_per_node": 4, "replication": 3}, "replication=3"),
        ({"ranks_per_node": 2, "num_nodes": 3, "replication": 4}, "replication=4"),
    ],
)
def test_invalid_worlds(kwargs, match) -> None:
    with pytest.raises(PlanError, match=match):
        World(**kwargs)
