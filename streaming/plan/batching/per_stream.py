"""per_stream: every global batch comes from a single stream.

Each stream's samples (in the random global order's relative order) are cut into whole global
batches; a stream's last partial batch is left out of the epoch, as in the reference, so no
sample repeats. Batches of all streams are interleaved with jittered stratification so every
part of the epoch sees each stream at its rate; without shuffling every epoch has one order.

Each canonical unit (streaming.plan.units) serves its block of every batch: of a batch
from stream s, its next samples of stream s (its own canonical node's, shuffled, plus what it
borrows from other units' surplus); a node builds only its own units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streaming.plan.batching.sequence import (
    chunk_counts,
    interleave,
    interleave_epoch,
    round_to_batch,
)
from streaming.plan.units import SlotEpoch, slot_method, stream_chunks, unit_bounds

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView
    from streaming.plan.world import World


def slot_epoch(order: EpochView, world: World, batch: int, start: int) -> SlotEpoch:
    """The epoch's per_stream batches as every unit's per-stream demand and layout.

    Args:
        order: the epoch.
        world: the asking world (only the data-parallel rank count matters).
        batch: per-device batch size.
        start: resume position (rounded down to a global batch, with a warning).
    """
    global_batch = batch * world.data_parallel_ranks
    start = round_to_batch(start, global_batch, "per_stream")
    counts = chunk_counts(order.stream_counts.sum(axis=0), global_batch, "per_stream")
    which, chunk = interleave(counts, order.cfg.shuffle_seed, interleave_epoch(order) + 1)
    first = start // global_batch
    widths = np.diff(unit_bounds(global_batch, order.num_canonical))

    def fill(c: int, values: dict[int, list[np.ndarray]]) -> np.ndarray:
        return stream_chunks(which[first:], chunk[first:], counts, int(widths[c]), values[c])

    return SlotEpoch(global_batch, len(which), first, np.outer(widths, counts), fill)


METHOD = slot_method("per_stream", slot_epoch)
