"""More node groups than canonical nodes (an elastic resume onto more nodes, or a small
num_canonical_nodes): every node reads a distinct share and the epoch stays exactly once."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.plan import PlanConfig, World, plan_node


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(("canonical", "nodes"), [(1, 2), (1, 3), (2, 4), (1, 4), (3, 6)])
@pytest.mark.parametrize("resume", [0, 96])
def test_each_sample_once_over_the_nodes(shuffle: bool, canonical: int, nodes: int,
                                         resume: int) -> None:
    cfg = PlanConfig(samples_per_shard=np.full(24, 64), shards_per_stream=(24,), batch_size=2,
                     shuffle=shuffle, num_canonical_nodes=canonical)
    plans = [plan_node(cfg, World(nodes, 2, 2, node, 0), 0, resume).ids for node in range(nodes)]
    seen = np.concatenate([ids[ids >= 0] for ids in plans])
    assert len(seen) == 24 * 64 - resume
    assert len(np.unique(seen)) == len(seen), "a sample planned on two nodes"
