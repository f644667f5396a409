"""stratified: every global batch holds the same number of samples of each stream.

Stream s's part of a global batch of B is floor(B * n_s / N) of its n_s samples in an epoch of
N, plus one for the streams with the largest remainders until the parts fill B (ties to the
later stream), as in the reference. The epoch ends when the first stream runs out of whole
parts, so the other streams' leftovers wait for the next epoch's draw. Inside a batch the
streams are spread evenly, so every device batch gets its share of each.

Each canonical unit (streaming.plan.units) serves its block of every batch from its
own canonical node's samples of each stream, shuffled, borrowing what it lacks from other
units' surplus; a node builds only its own units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streaming.errors import PlanError
from streaming.plan.batching.sequence import round_to_batch
from streaming.plan.units import SlotEpoch, slot_method, unit_bounds, unit_stream_slots

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView
    from streaming.plan.world import World


def batch_parts(stream_sizes: np.ndarray, global_batch: int) -> np.ndarray:
    """int64 [S]: samples of each stream in every global batch (summing to the batch)."""
    total = int(stream_sizes.sum())
    scaled = global_batch * stream_sizes.astype(np.int64)
    parts = scaled // max(total, 1)
    short = global_batch - int(parts.sum())
    if short > 0:
        remainder = scaled - parts * total
        ranked = np.lexsort((-np.arange(len(parts)), -remainder))
        parts[ranked[:short]] += 1
    small = np.flatnonzero(parts == 0)
    if len(small):
        s = int(small[0])
        raise PlanError(
            f"Number of samples for stream {s} is 0 in each global batch of {global_batch}: "
            f"batching_method='stratified': stream {s} has {int(stream_sizes[s])} of {total} "
            f"samples, less than one per global batch of {global_batch}; raise its weight or "
            "the batch size")
    return parts


def slot_streams(parts: np.ndarray) -> np.ndarray:
    """int64 [B]: the stream of every slot of a global batch, slot t of stream s sitting at
    (t + 0.5) / part_s of the batch (ties to the earlier stream) so the streams interleave
    evenly. Each slot's place is counted, not sorted: O(B x S).

    Args:
        parts: int64 [S] slots of each stream in a global batch (`batch_parts`).
    """
    parts = parts.astype(np.int64)
    out = np.empty(int(parts.sum()), dtype=np.int64)
    for s, p in enumerate(parts.tolist()):
        t = np.arange(p, dtype=np.int64)
        place = t.copy()
        for r, q in enumerate(parts.tolist()):
            if r == s:
                continue
            # Slots t' of stream r before slot t of s: (2t' + 1) p < (2t + 1) q, or <= when r < s.
            x = (2 * t + 1) * q - p
            before = x // (2 * p) + 1 if r < s else -(-x // (2 * p))
            place += np.clip(before, 0, q)
        out[place] = s
    return out


def _fill(slots: np.ndarray, batches: int, first: int, values: list[np.ndarray]) -> np.ndarray:
    """Unit c's rows from batch `first`: its stream-s slots take stream s's samples in order."""
    out = np.empty((batches - first, len(slots)), dtype=np.int64)
    for s, ids in enumerate(values):
        cols = np.flatnonzero(slots == s)
        m = len(cols)
        if m:
            out[:, cols] = ids[first * m:batches * m].reshape(-1, m)
    return out


def slot_epoch(order: EpochView, world: World, batch: int, start: int) -> SlotEpoch:
    """The epoch's stratified batches as every unit's per-stream demand and layout.

    Args:
        order: the epoch.
        world: the asking world (only the data-parallel rank count matters).
        batch: per-device batch size.
        start: resume position (rounded down to a global batch, with a warning).
    """
    global_batch = batch * world.data_parallel_ranks
    start = round_to_batch(start, global_batch, "stratified")
    sizes = order.stream_counts.sum(axis=0)
    parts = batch_parts(sizes, global_batch)
    batches = int((sizes // parts).min())
    if batches == 0:
        raise PlanError(f"batching_method='stratified': the epoch's streams ({sizes.tolist()} "
                        f"samples) do not fill one global batch of {global_batch}")
    slots = slot_streams(parts)
    num = order.num_canonical
    bounds = unit_bounds(global_batch, num)
    first = start // global_batch

    def fill(c: int, values: dict[int, list[np.ndarray]]) -> np.ndarray:
        return _fill(slots[bounds[c]:bounds[c + 1]], batches, first, values[c])

    demand = unit_stream_slots(slots, num, len(parts)) * batches
    return SlotEpoch(global_batch, batches, first, demand, fill)


METHOD = slot_method("stratified", slot_epoch)
