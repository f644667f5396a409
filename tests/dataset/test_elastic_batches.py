"""The elastic-resume property of the multi-process test, checked in one process: after a
resume, the global batches (union over ranks of each rank's DataLoader batch g) are the same
sets on 2 nodes x 2 ranks x batch 4 and on 1 node x 2 ranks x batch 8. A plan change that broke
it would show here deterministically instead of as a multi-process failure."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.plan import World, plan_node
from tests.support.datasets import write_ids

WORKERS = 2


def loader_order(ids: np.ndarray, batch: int) -> list[np.ndarray]:
    """One rank's batches as a DataLoader yields them: worker w's k-th batch is batch
    k * WORKERS + w; all -1 batches are padding a worker never yields."""
    rows = [ids[w].reshape(-1, batch) for w in range(WORKERS)]
    out = []
    for k in range(max(len(r) for r in rows)):
        out += [r[k] for r in rows if k < len(r) and (r[k] >= 0).all()]
    return out


def global_batches(source: Path, cache: Path, nodes: int, batch: int,
                   state: dict) -> list[list[int]]:
    return planned_batches(lambda world: StreamingDataset(local=source, shuffle=True,
                                                          batch_size=batch, world=world),
                           nodes, batch, state)


def planned_batches(make: Callable[[World], StreamingDataset], nodes: int, batch: int,
                    state: dict) -> list[list[int]]:
    """The global batches after resuming `state` on `nodes` nodes x 2 ranks x WORKERS workers
    of the dataset `make(world)` builds with `batch` samples per rank's batch."""
    world = World(nodes, 2, WORKERS, 0, 0, 0, 1)
    ds = make(world)
    ds.load_state_dict(state)
    cfg = ds.session.plans.config_now()
    ranks = []
    for node in range(nodes):
        plan = plan_node(cfg, World(nodes, 2, WORKERS, node, 0, 0, 1), state["epoch"],
                         state["sample_in_epoch"])
        ranks += [loader_order(plan.ids[r], batch) for r in range(2)]
    ds.close()
    assert len({len(r) for r in ranks}) == 1
    return [sorted(np.concatenate([r[g] for r in ranks]).tolist()) for g in range(len(ranks[0]))]


@pytest.mark.parametrize("stop", [0, 5, 7])
def test_resumed_global_batches_match_across_topologies(tmp_path: Path, stop: int) -> None:
    source = write_ids(tmp_path / "a", 320, size_limit=600)
    two = StreamingDataset(local=source, shuffle=True, batch_size=4,
                           world=World(2, 2, 1, 0, 0, 0, 1))
    state = two.state_dict(stop * 16, False)
    two.close()
    same = global_batches(source, tmp_path, 2, 4, state)
    smaller = global_batches(source, tmp_path, 1, 8, state)
    assert same == smaller
    assert len(same) == 20 - stop
    assert sorted(i for b in same for i in b) == sorted(
        set(range(320)) - {i for b in global_batches(source, tmp_path, 2, 4, {
            **state, "sample_in_epoch": 0})[:stop] for i in b})
