"""Helpers the batching methods share: resume rounding, per-stream orders, interleaving
streams' chunks, and a node group's share of a global sequence."""

from __future__ import annotations

import warnings
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from streaming.errors import PlanError
from streaming.plan.traits import BatchingMethod, GlobalSequenceFn

if TYPE_CHECKING:
    from streaming.plan.order import EpochOrder
    from streaming.plan.world import World

_INTERLEAVE_TAG = 0xBA7C


def round_to_batch(sample_in_epoch: int, global_batch: int, method: str) -> int:
    """Resume position rounded down to a global batch boundary (warns when it moves)."""
    start = sample_in_epoch - sample_in_epoch % global_batch
    if start != sample_in_epoch:
        warnings.warn(
            f"batching_method={method!r} resumes on global batch boundaries: "
            f"sample_in_epoch={sample_in_epoch} rounded down to {start}",
            stacklevel=4,
        )
    return start


def stream_orders(order: EpochOrder) -> list[np.ndarray]:
    """Each stream's samples in the order they appear in the random global order."""
    ids, pad = order.take(np.arange(order.span, dtype=np.int64))
    ids = ids[~pad]
    stream = np.searchsorted(order.cfg.stream_offsets, ids, side="right") - 1
    counts = np.bincount(stream, minlength=order.cfg.num_streams)
    grouped = ids[np.argsort(stream, kind="stable")]
    return np.split(grouped, np.cumsum(counts)[:-1])


def interleave(counts: np.ndarray, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """(stream, chunk index) of all streams' chunks, mixed in proportion to their counts.

    Chunk k of stream s sits at time (k + u) / counts[s] with u uniform: every stretch of the
    epoch sees each stream at its rate (jittered stratification, no clumping of one stream).
    """
    rng = np.random.default_rng([seed, epoch, _INTERLEAVE_TAG])
    stream = np.repeat(np.arange(len(counts)), counts)
    starts = np.concatenate(([0], np.cumsum(counts)))[:-1]
    chunk = np.arange(len(stream)) - np.repeat(starts, counts)
    times = (chunk + rng.random(len(stream))) / np.maximum(counts[stream], 1)
    order = np.lexsort((stream, times))
    return stream[order], chunk[order]


def _interleave_epoch(order: EpochOrder) -> int:
    """Epoch word of the stream interleave: unshuffled (or `fixed`) epochs repeat one order."""
    cfg = order.cfg
    return order.epoch if cfg.shuffle and cfg.sampling_method == "balanced" else -1


def full_chunks(order: EpochOrder, unit: int, method: str) -> np.ndarray:
    """The epoch's streams (`stream_orders`) each cut into whole chunks of `unit` (a partial last
    chunk is dropped), the chunks of all streams interleaved; PlanError naming `method` when a
    stream cannot fill a single chunk."""
    streams = stream_orders(order)
    counts = np.array([len(s) // unit for s in streams], dtype=np.int64)
    empty = np.flatnonzero(counts == 0)
    if len(empty):
        s = int(empty[0])
        raise PlanError(
            f"batching_method={method!r}: stream {s} has {len(streams[s])} samples this epoch, "
            f"fewer than one batch of {unit}; raise its weight or lower batch_size")
    which, chunk = interleave(counts, order.cfg.shuffle_seed, _interleave_epoch(order) + 1)
    ids = np.empty((len(which), unit), dtype=np.int64)
    for s, values in enumerate(streams):
        rows = np.flatnonzero(which == s)
        ids[rows] = values[:int(counts[s]) * unit].reshape(-1, unit)[chunk[rows]]
    return ids.reshape(-1)


def group_share(sequence: np.ndarray, world: World, batch: int) -> np.ndarray:
    """The asking group's part of a global sequence: rank d takes slot d of every batch."""
    rd = world.group_ranks
    span = world.num_groups * rd * batch
    grid = sequence.reshape(-1, span)
    return grid[:, world.group * rd * batch:(world.group + 1) * rd * batch].reshape(-1, rd, batch)


def sequence_share(global_sequence: GlobalSequenceFn, order: EpochOrder, world: World,
                   batch: int, start: int) -> tuple[np.ndarray, int]:
    """group_batches for methods that build the whole global sequence first."""
    ids, _, start = global_sequence(order, world, batch, start)
    return group_share(ids, world, batch), start


def sequence_method(name: str, global_sequence: GlobalSequenceFn) -> BatchingMethod:
    """The record of a method that builds the whole global sequence, each node group taking its
    share of every batch; such a method needs the batch size and resumes on batch boundaries."""
    return BatchingMethod(name, partial(sequence_share, global_sequence), global_sequence,
                          needs_batch_size=True, batch_aligned_resume=True)
