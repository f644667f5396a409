"""random: global batches are consecutive stretches of the shuffled global order.

Stream mix holds in expectation. Node groups own positions p = s + q (mod groups), so a node
reads only the canonical nodes congruent to it: canonical-node locality is exact.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.order import EpochOrder
from streaming.plan.world import World


def _positions(order: EpochOrder, world: World, batch: int, start: int) -> int:
    global_batch = batch * world.data_parallel_ranks
    remaining = max(order.span - start, 0)
    return -(-remaining // global_batch) * global_batch


def global_sequence(order: EpochOrder, world: World, batch: int, start: int):
    """Whole global sequence from `start` (ids, padding mask, start used)."""
    total = _positions(order, world, batch, start)
    ids, pad = order.take(np.arange(start, start + total, dtype=np.int64))
    return ids, pad, start


def group_batches(order: EpochOrder, world: World, batch: int, start: int):
    """[batches, group ranks, batch] ids for the asking group (any resume position works)."""
    groups = world.num_groups
    local = _positions(order, world, batch, start) // groups
    ids = order.take_progression(start + world.group, groups, local)
    return ids.reshape(-1, world.group_ranks, batch), start
