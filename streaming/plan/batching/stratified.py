"""stratified: every global batch holds the same number of samples of each stream.

Stream s's part of a global batch of B is floor(B * n_s / N) of its n_s samples in an epoch of
N, plus one for the streams with the largest remainders until the parts fill B (ties to the
later stream), as in the reference. The epoch ends when the first stream runs out of whole
parts, so the other streams' leftovers wait for the next epoch's draw. Inside a batch the
streams are spread evenly, so every device batch gets its share of each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streaming.errors import PlanError
from streaming.plan.batching.sequence import round_to_batch, sequence_method, stream_orders

if TYPE_CHECKING:
    from streaming.plan.order import EpochOrder
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
            f"batching_method='stratified': stream {s} has {int(stream_sizes[s])} of {total} "
            f"samples, less than one per global batch of {global_batch}; raise its weight or "
            "the batch size")
    return parts


def global_sequence(order: EpochOrder, world: World, batch: int, start: int):
    """Whole global sequence from `start` rounded to a batch (ids, padding mask, start used)."""
    global_batch = batch * world.data_parallel_ranks
    start = round_to_batch(start, global_batch, "stratified")
    streams = stream_orders(order)
    sizes = np.array([len(s) for s in streams], dtype=np.int64)
    parts = batch_parts(sizes, global_batch)
    batches = min(len(s) // int(p) for s, p in zip(streams, parts))
    if batches == 0:
        raise PlanError(f"batching_method='stratified': the epoch's streams ({sizes.tolist()} "
                        f"samples) do not fill one global batch of {global_batch}")
    first = start // global_batch
    if first >= batches:
        return np.empty(0, np.int64), np.empty(0, bool), start
    # Slot t of stream s sits at (t + 0.5) / part_s of the batch: the streams interleave evenly.
    stream = np.repeat(np.arange(len(parts)), parts)
    offsets = np.cumsum(parts) - parts
    slot = np.arange(global_batch) - offsets[stream]
    where = np.empty(global_batch, dtype=np.int64)
    where[np.lexsort((stream, (slot + 0.5) / parts[stream]))] = np.arange(global_batch)
    out = np.empty((batches - first, global_batch), dtype=np.int64)
    for s, values in enumerate(streams):
        p, o = int(parts[s]), int(offsets[s])
        out[:, where[o:o + p]] = values[first * p:batches * p].reshape(-1, p)
    ids = out.reshape(-1)
    return ids, np.zeros(len(ids), dtype=bool), start


METHOD = sequence_method("stratified", global_sequence)
