"""random: global batches are consecutive stretches of the shuffled global order.

Stream mix holds in expectation. Data-parallel rank l of node group q owns the positions
p = l * groups + q (mod ranks) of the epoch, as the reference interleaves ranks; a node group
therefore reads only the canonical nodes congruent to it, also after a resume (warm caches).

Padding (see docs/batching.md): one data-parallel rank reads the real samples only, each once,
ending on a partial batch. Several ranks need equal counts: positions past a short canonical
node's end repeat its last samples, and the epoch is extended to a multiple of the rank count
with fewer repeats than ranks, each a sample another rank of the same node group holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streaming.plan.traits import BatchingMethod

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView
    from streaming.plan.world import World


def _end(order: EpochView, ranks: int, start: int) -> int:
    """End of the served positions: the epoch's, extended to a multiple of `ranks`."""
    remaining = max(order.span - start, 0)
    return start + remaining + -remaining % ranks


def _real(order: EpochView) -> np.ndarray:
    """The epoch's samples without padding, in global order (a single rank's sequence).

    Padding lies only in rounds past the shortest canonical node, so the rounds before are
    taken by strided slices (a view for one canonical node) and only the tail is filtered.
    """
    full = int(order.lengths.min()) * order.num_canonical
    head = order.take_progression(0, 1, full)
    if full == order.span:
        return head
    ids, pad = order.take(np.arange(full, order.span, dtype=np.int64))
    return np.concatenate((head, ids[~pad].astype(head.dtype, copy=False)))


def _extend(order: EpochView, first: int, step: int, ids: np.ndarray, groups: int
            ) -> np.ndarray:
    """`ids` of positions first + step * j, those past the epoch filled from the group's last
    position inside it: the same canonical node (no extra sequence to build) and, as a group
    has fewer positions past the end than ranks, another rank of the group."""
    span = order.span
    inside = max(0, -(-(span - first) // step))
    if inside >= len(ids):
        return ids
    ids = np.array(ids, dtype=np.int64)
    past = first + step * np.arange(inside, len(ids), dtype=np.int64)
    source = past - groups * -(-(past - span + 1) // groups)
    ids[inside:] = order.take(np.where(source >= 0, source, source % span))[0]
    return ids


def global_sequence(order: EpochView, world: World, batch: int, start: int):
    """Whole global sequence from `start` (ids, padding mask, start used)."""
    ranks = world.data_parallel_ranks
    if ranks == 1:
        ids = _real(order)[start:]
        return ids, np.zeros(len(ids), dtype=bool), start
    end = _end(order, ranks, start)
    positions = np.arange(start, end, dtype=np.int64)
    ids, pad = order.take(positions)
    ids = _extend(order, start, 1, ids, world.num_groups)
    return ids, pad | (positions >= order.span), start


def _to_batches(per_rank: np.ndarray, batch: int) -> np.ndarray:
    """[samples, ranks] -> [batches, ranks, batch], the last batch filled up with -1."""
    n, ranks = per_rank.shape
    batches = -(-n // batch)
    out = np.full((batches * batch, ranks), -1, dtype=np.int64)
    out[:n] = per_rank
    return out.reshape(batches, batch, ranks).transpose(0, 2, 1)


def group_batches(order: EpochView, world: World, batch: int, start: int):
    """[batches, group ranks, batch] ids for the asking group (any resume position works)."""
    if world.data_parallel_ranks == 1:
        ids = _real(order)[start:]
        return _to_batches(ids.reshape(-1, 1), batch), start
    groups, group_ranks = world.num_groups, world.group_ranks
    end = _end(order, world.data_parallel_ranks, start)
    count = (end - start) // groups
    first = start + (world.group - start) % groups
    ids = _extend(order, first, groups, order.take_progression(first, groups, count), groups)
    return _to_batches(ids.reshape(-1, group_ranks), batch), start


METHOD = BatchingMethod("random", group_batches, global_sequence,
                        needs_batch_size=False, batch_aligned_resume=False)
