"""device_per_stream: every device batch comes from a single stream; a global batch may mix.

Streams are cut into whole device batches (a stream's last partial one is left out, as in the
reference). Canonical unit c owns device slots [c*R // C, (c+1)*R // C) of every global batch of
R device batches (streaming.plan.units); the streams' device batches are split over the units
in proportion to their slots, and each unit interleaves its own with jittered stratification.
The count is padded to whole global batches (a multiple of the rank count): the last global
batch ends with repeats of the first device batches of the units holding those slots, so every
rank gets the same number of batches (the reference leaves such ranks short instead). Without
shuffling every epoch has one order.
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
from streaming.plan.units import SlotEpoch, slot_method, stream_chunks

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView
    from streaming.plan.world import World


def apportion(totals: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """int64 [C, S]: each stream's `totals[s]` split over units in proportion to their remaining
    capacity, stream after stream (largest remainders, ties to the earlier unit). Row sums
    equal `capacity` when the totals sum to it.

    Args:
        totals: int64 [S] items of each stream.
        capacity: int64 [C] items each unit takes.
    """
    room = capacity.astype(np.int64).copy()
    out = np.zeros((len(room), len(totals)), dtype=np.int64)
    for s, k in enumerate(totals.tolist()):
        left_room = int(room.sum())
        if not k or not left_room:
            continue
        exact = room * k
        part = exact // left_room
        short = k - int(part.sum())
        if short:
            ranked = np.lexsort((np.arange(len(room)), -(exact - part * left_room)))
            part[ranked[:short]] += 1
        out[:, s] = part
        room -= part
    return out


def _sequence(order: EpochView, shares: np.ndarray, unit: int, count: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """(stream, device batch) of the unit's first `count` slots, its own batches repeated from
    the start to fill them."""
    which, chunk = interleave(shares, order.cfg.shuffle_seed, interleave_epoch(order) + 1, unit)
    again = np.arange(count) % max(len(which), 1)
    return which[again], chunk[again]


def slot_epoch(order: EpochView, world: World, batch: int, start: int) -> SlotEpoch:
    """The epoch's device_per_stream batches as every unit's per-stream demand and layout.

    Args:
        order: the epoch.
        world: the asking world (only the data-parallel rank count matters).
        batch: per-device batch size.
        start: resume position (rounded down to a global batch, with a warning).
    """
    ranks = world.data_parallel_ranks
    global_batch = batch * ranks
    start = round_to_batch(start, global_batch, "device_per_stream")
    counts = chunk_counts(order.stream_counts.sum(axis=0), batch, "device_per_stream")
    total = int(counts.sum())
    batches = -(-total // ranks)
    padding = batches * ranks - total
    devices = np.arange(order.num_canonical + 1, dtype=np.int64) * ranks // order.num_canonical
    slots = np.diff(devices)
    held = np.clip(devices, ranks - padding, ranks)
    real = batches * slots - np.diff(held)
    shares = apportion(counts, real)
    donors = np.where(real > 0, np.arange(order.num_canonical), int(np.argmax(real > 0)))
    first = start // global_batch

    def fill(c: int, values: dict[int, list[np.ndarray]]) -> np.ndarray:
        own = _sequence(order, shares[c], c, int(real[c]))
        rows = stream_chunks(*own, shares[c], batch, values[c])
        if real[c] < batches * slots[c]:
            d = int(donors[c])
            lent = _sequence(order, shares[d], d, int(batches * slots[c] - real[c]))
            rows = np.concatenate((rows, stream_chunks(*lent, shares[d], batch, values[d])))
        return rows.reshape(batches, -1)[first:]

    return SlotEpoch(global_batch, batches, first, shares * batch, fill,
                     padding=padding * batch, donors=donors, bounds=devices * batch)


METHOD = slot_method("device_per_stream", slot_epoch)
