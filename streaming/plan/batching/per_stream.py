"""per_stream: every global batch comes from a single stream.

Each stream's samples (in the random global order's relative order) are cut into whole global
batches; a stream's last partial batch is left out of the epoch, as in the reference, so no
sample repeats. Batches of all streams are interleaved with jittered stratification so every
part of the epoch sees each stream at its rate; without shuffling every epoch has one order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streaming.plan.batching.sequence import full_chunks, round_to_batch, sequence_method

if TYPE_CHECKING:
    from streaming.plan.order import EpochOrder
    from streaming.plan.world import World


def global_sequence(order: EpochOrder, world: World, batch: int, start: int):
    """Whole global sequence from `start` rounded to a batch (ids, padding mask, start used)."""
    global_batch = batch * world.data_parallel_ranks
    start = round_to_batch(start, global_batch, "per_stream")
    ids = full_chunks(order, global_batch, "per_stream")[start:]
    return ids, np.zeros(len(ids), dtype=bool), start


METHOD = sequence_method("per_stream", global_sequence)
