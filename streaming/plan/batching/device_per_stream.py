"""device_per_stream: every device batch comes from a single stream; a global batch may mix.

Streams are cut into whole device batches (a stream's last partial one is left out, as in the
reference) and interleaved with jittered stratification; the count is padded to whole global
batches (a multiple of the rank count) by repeating the epoch's first device batches, so every
rank gets the same number of batches (the reference leaves such ranks short instead). Without
shuffling every epoch has one order.
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
    ranks = world.data_parallel_ranks
    global_batch = batch * ranks
    start = round_to_batch(start, global_batch, "device_per_stream")
    ids = full_chunks(order, batch, "device_per_stream")
    pad = np.zeros(len(ids), dtype=bool)
    missing = -(len(ids) // batch) % ranks
    if missing:
        reuse = np.arange(missing * batch) % len(ids)
        ids = np.concatenate((ids, ids[reuse]))
        pad = np.concatenate((pad, np.ones(len(reuse), dtype=bool)))
    return ids[start:], pad[start:], start


METHOD = sequence_method("device_per_stream", global_sequence)
