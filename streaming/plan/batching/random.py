"""random: global batches are consecutive stretches of the shuffled global order.

Stream mix holds in expectation. Node group q owns the positions p = q (mod groups), also after
a resume, so a node reads only the canonical nodes congruent to it: locality is exact.
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
    # Keep serving the residue class p = group (mod groups) after a resume: same canonical
    # nodes, warm caches. Any window of B positions holds B / groups of each residue.
    first = start + (world.group - start) % groups
    ids = order.take_progression(first, groups, local)
    return ids.reshape(-1, world.group_ranks, batch), start
