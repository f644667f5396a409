"""stratified: every global batch holds each stream's exact share (floor or ceil of it).

Per-batch counts come from McNaughton's wrap-around rule: stream s gets floor(n_s / G) samples
in every batch plus one extra in a contiguous cyclic run of batches, so counts are exact,
deterministic and each stream is consumed in its own order, one contiguous stretch per batch.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.batching import cyclic, round_to_batch, sequence_share, stream_orders
from streaming.plan.order import EpochOrder
from streaming.plan.world import World


def batch_counts(stream_sizes: np.ndarray, global_batch: int) -> np.ndarray:
    """int64 [G, S]: samples of each stream in each global batch (rows sum to the batch)."""
    total = int(stream_sizes.sum())
    batches = max(-(-total // global_batch), 1)
    # Pad the epoch to whole batches, shares proportional to stream sizes (largest remainder).
    exact = stream_sizes * (batches * global_batch / total)
    ext = np.maximum(np.floor(exact).astype(np.int64), stream_sizes)
    short = batches * global_batch - int(ext.sum())
    if short > 0:
        ext[np.argsort(-(exact - np.floor(exact)), kind="stable")[:short]] += 1
    base = ext // batches
    extra = ext - base * batches
    first = np.cumsum(extra) - extra
    g = np.arange(batches + 1)[:, None]

    def wrapped(x: np.ndarray) -> np.ndarray:  # slots t < x with t mod G < g
        return (x // batches) * g + np.minimum(x % batches, g)

    consumed = g * base + wrapped(first + extra) - wrapped(first)
    return np.diff(consumed, axis=0)


def global_sequence(order: EpochOrder, world: World, batch: int, start: int):
    """Whole global sequence from `start` rounded to a batch (ids, padding mask, start used)."""
    global_batch = batch * world.data_parallel_ranks
    start = round_to_batch(start, global_batch, "stratified")
    streams = stream_orders(order)
    counts = batch_counts(np.array([len(s) for s in streams], dtype=np.int64), global_batch)
    first = start // global_batch
    consumed = counts[:first].sum(axis=0)
    counts = counts[first:]
    if len(counts) == 0:
        return np.empty(0, np.int64), np.empty(0, bool), start
    ids, pad, keys = [], [], []
    for s, values in enumerate(streams):
        per_batch = counts[:, s]
        total = int(per_batch.sum())
        full, full_pad = cyclic(values, int(consumed[s]) + total)
        ids.append(full[int(consumed[s]):])
        pad.append(full_pad[int(consumed[s]):])
        g = np.repeat(np.arange(len(per_batch)), per_batch)
        rank = np.arange(total) - np.repeat(np.cumsum(per_batch) - per_batch, per_batch)
        keys.append((g, (rank + 0.5) / np.maximum(per_batch[g], 1), np.full(total, s)))
    g, key, s = (np.concatenate(part) for part in zip(*keys))
    perm = np.lexsort((s, key, g))
    return np.concatenate(ids)[perm], np.concatenate(pad)[perm], start


def group_batches(order: EpochOrder, world: World, batch: int, start: int):
    """[batches, group ranks, batch] ids for the asking group."""
    return sequence_share(global_sequence, order, world, batch, start)
