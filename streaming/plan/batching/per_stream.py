"""per_stream: every global batch comes from a single stream.

Each stream's samples (in the random global order's relative order) are cut into global
batches, its last batch padded from its own samples; batches of all streams are interleaved
with jittered stratification so every part of the epoch sees each stream at its rate.
"""

from __future__ import annotations

from streaming.plan.batching import chunked, round_to_batch, sequence_share, stream_orders
from streaming.plan.order import EpochOrder
from streaming.plan.world import World


def global_sequence(order: EpochOrder, world: World, batch: int, start: int):
    """Whole global sequence from `start` rounded to a batch (ids, padding mask, start used)."""
    global_batch = batch * world.data_parallel_ranks
    start = round_to_batch(start, global_batch, "per_stream")
    cfg = order.cfg
    ids, pad = chunked(stream_orders(order), global_batch, cfg.shuffle_seed, order.epoch)
    return ids[start:], pad[start:], start


def group_batches(order: EpochOrder, world: World, batch: int, start: int):
    """[batches, group ranks, batch] ids for the asking group."""
    return sequence_share(global_sequence, order, world, batch, start)
