"""Stream-shaped batching computed per canonical unit, so a node pays only its share.

Canonical unit c owns slots [c*B // C, (c+1)*B // C) of every global batch of B slots. A
method describes its epoch as a `SlotEpoch`: how many samples of each stream every unit serves
(`demand`) and how a unit lays its streams' samples into its slots (`fill`). The samples come
from `supply.unit_streams`, which depends on C and B only, so global batches stay the same on
any number of physical nodes. A node group builds just the units overlapping its slots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from streaming.plan.supply import unit_streams
from streaming.plan.traits import BatchingMethod

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView
    from streaming.plan.world import World

# (unit, the streams' samples in serving order of the units built) -> ids [batches - first,
# unit width]
FillFn = Callable[[int, dict[int, list[np.ndarray]]], np.ndarray]


@dataclass(frozen=True)
class SlotEpoch:
    """An epoch of `batches` global batches of `global_batch` slots, served from batch `first`.

    demand: int64 [C, S] samples of each stream each unit serves in the whole epoch.
    fill: a unit's rows of the batches from `first` on, from its and its donor's samples.
    padding: the last `padding` slots of the epoch only repeat samples to even out the ranks.
    donors: int64 [C], the unit whose samples a unit repeats as padding (None: itself).
    bounds: int64 [C + 1] the units' slot blocks (None: `unit_bounds`).
    """

    global_batch: int
    batches: int
    first: int
    demand: np.ndarray
    fill: FillFn
    padding: int = 0
    donors: np.ndarray | None = None
    bounds: np.ndarray | None = None

    @property
    def start(self) -> int:
        """The resume position used (a global batch boundary)."""
        return self.first * self.global_batch


# (order, world, per-device batch, resume position) -> the method's SlotEpoch
SlotEpochFn = Callable[["EpochView", "World", int, int], SlotEpoch]


def unit_bounds(global_batch: int, num_canonical: int) -> np.ndarray:
    """int64 [C + 1]: the slot block of every canonical unit inside a global batch.

    Args:
        global_batch: slots of a global batch (B).
        num_canonical: canonical nodes (C).
    """
    return np.arange(num_canonical + 1, dtype=np.int64) * global_batch // num_canonical


def unit_stream_slots(slot_stream: np.ndarray, num_canonical: int, num_streams: int
                      ) -> np.ndarray:
    """int64 [C, S]: slots of each stream inside each unit's block of one global batch.

    Args:
        slot_stream: int64 [B] the stream of every slot.
        num_canonical: canonical nodes (C).
        num_streams: streams (S).
    """
    size = len(slot_stream)
    # Slot j lies in the last unit c with c * size // C <= j, i.e. c = ((j + 1) C - 1) // size.
    unit = ((np.arange(1, size + 1, dtype=np.int64) * num_canonical - 1) // max(size, 1))
    flat = np.bincount(unit * num_streams + slot_stream, minlength=num_canonical * num_streams)
    return flat.reshape(num_canonical, num_streams).astype(np.int64)


def stream_chunks(which: np.ndarray, chunk: np.ndarray, counts: np.ndarray, width: int,
                  values: list[np.ndarray]) -> np.ndarray:
    """ids [len(which), width]: row i is chunk `chunk[i]` (of `width` ids) of stream `which[i]`.

    Args:
        which: the stream of each row.
        chunk: the chunk of that stream each row takes.
        counts: per stream, how many whole chunks its ids hold.
        width: ids per chunk.
        values: per stream, its ids in order.
    """
    out = np.empty((len(which), width), dtype=np.int64)
    for s, ids in enumerate(values):
        rows = np.flatnonzero(which == s)
        if len(rows):
            out[rows] = ids[:int(counts[s]) * width].reshape(-1, width)[chunk[rows]]
    return out


def columns(order: EpochView, epoch: SlotEpoch, lo: int, hi: int) -> np.ndarray:
    """int64 [batches - first, hi - lo]: slots [lo, hi) of the batches from `first` on.

    Args:
        order: the epoch.
        epoch: the method's description of it.
        lo: first slot asked for.
        hi: end of the slots asked for.
    """
    bounds = epoch.bounds
    if bounds is None:
        bounds = unit_bounds(epoch.global_batch, order.num_canonical)
    units = np.flatnonzero((bounds[:-1] < hi) & (bounds[1:] > lo)
                           & (bounds[1:] > bounds[:-1])).tolist()
    rows = max(epoch.batches - epoch.first, 0)
    if not rows:
        return np.empty((0, hi - lo), dtype=np.int64)
    donors = [] if epoch.donors is None else epoch.donors[units].tolist()
    values = unit_streams(order, epoch.demand, sorted(set(units).union(donors)))
    if len(units) == 1 and (bounds[units[0]], bounds[units[0] + 1]) == (lo, hi):
        return epoch.fill(units[0], values)  # the node is exactly one unit: no copy
    out = np.empty((rows, hi - lo), dtype=np.int64)
    for c in units:
        a, b = int(bounds[c]), int(bounds[c + 1])
        grid = epoch.fill(c, values)
        out[:, max(a, lo) - lo:min(b, hi) - lo] = grid[:, max(a, lo) - a:min(b, hi) - a]
    return out


def group_batches(build: SlotEpochFn, order: EpochView, world: World, batch: int,
                  start: int) -> tuple[np.ndarray, int]:
    """[batches, group ranks, batch] for the asking node group: its slots of every batch.

    Args:
        build: the method's SlotEpoch builder.
        order: the epoch.
        world: the asking node group's world.
        batch: per-device batch size.
        start: resume position (rounded down to a global batch).
    """
    epoch = build(order, world, batch, start)
    width = world.group_ranks * batch
    lo = world.group * width
    grid = columns(order, epoch, lo, lo + width)
    return grid.reshape(-1, world.group_ranks, batch), epoch.start


def global_sequence(build: SlotEpochFn, order: EpochView, world: World, batch: int,
                    start: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The whole global sequence from the resume batch (ids, padding mask, start used).

    Args:
        build: the method's SlotEpoch builder.
        order: the epoch.
        world: any world of the job (only the data-parallel rank count matters).
        batch: per-device batch size.
        start: resume position (rounded down to a global batch).
    """
    epoch = build(order, world, batch, start)
    ids = columns(order, epoch, 0, epoch.global_batch).reshape(-1)
    pad = np.zeros(len(ids), dtype=bool)
    if epoch.padding and epoch.first < epoch.batches:
        pad[len(ids) - epoch.padding:] = True
    return ids, pad, epoch.start


def slot_method(name: str, build: SlotEpochFn) -> BatchingMethod:
    """The record of a method described by a SlotEpoch; it needs the batch size and resumes on
    global batch boundaries.

    Args:
        name: the method's registered name.
        build: (order, world, per-device batch, resume position) -> SlotEpoch.
    """
    return BatchingMethod(name, partial(group_batches, build), partial(global_sequence, build),
                          needs_batch_size=True, batch_aligned_resume=True, stream_shaped=True)
