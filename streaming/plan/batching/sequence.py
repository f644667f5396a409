"""Helpers the batching methods share: resume rounding, whole chunks per stream and
interleaving streams' chunks."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from streaming.errors import PlanError

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView

_INTERLEAVE_TAG = 0xBA7C


def round_to_batch(sample_in_epoch: int, global_batch: int, method: str) -> int:
    """Resume position rounded down to a global batch boundary (warns when it moves)."""
    start = sample_in_epoch - sample_in_epoch % global_batch
    if start != sample_in_epoch:
        warnings.warn(
            f"Because of the `{method}` batching method, resumption may only occur on a sample "
            f"that is a multiple of the current global batch size of {global_batch}: "
            f"batching_method={method!r} resumes on global batch boundaries: "
            f"sample_in_epoch={sample_in_epoch} rounded down to {start}",
            stacklevel=4,
        )
    return start


def interleave(counts: np.ndarray, seed: int, epoch: int, unit: int | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """(stream, chunk index) of all streams' chunks, mixed in proportion to their counts (a
    `unit` draws its own jitter).

    Chunk k of stream s sits at time (k + u) / counts[s] with u uniform: every stretch of the
    epoch sees each stream at its rate (jittered stratification, no clumping of one stream).
    """
    key = [seed, epoch, _INTERLEAVE_TAG] + ([] if unit is None else [unit])
    rng = np.random.default_rng(key)
    stream = np.repeat(np.arange(len(counts)), counts)
    starts = np.concatenate(([0], np.cumsum(counts)))[:-1]
    chunk = np.arange(len(stream)) - np.repeat(starts, counts)
    times = (chunk + rng.random(len(stream))) / np.maximum(counts[stream], 1)
    order = np.lexsort((stream, times))
    return stream[order], chunk[order]


def interleave_epoch(order: EpochView) -> int:
    """Epoch word of the stream interleave: unshuffled (or `fixed`) epochs repeat one order."""
    cfg = order.cfg
    return order.epoch if cfg.shuffle and cfg.sampling_method == "balanced" else -1


def chunk_counts(sizes: np.ndarray, unit: int, method: str) -> np.ndarray:
    """int64 [S]: whole chunks of `unit` in each stream's `sizes` samples; PlanError naming
    `method` when a stream cannot fill a single chunk.

    Args:
        sizes: int64 [S] samples of each stream this epoch.
        unit: samples in a chunk.
        method: the batching method's name, for the error.
    """
    counts = sizes.astype(np.int64) // unit
    empty = np.flatnonzero(counts == 0)
    if len(empty):
        s = int(empty[0])
        raise PlanError(
            f"Stream with index {s} does not have an adequate number of samples to construct "
            f"a single batch of {unit}: batching_method={method!r}: stream {s} has "
            f"{int(sizes[s])} samples this epoch, fewer than one batch of {unit}; raise its "
            "weight or lower batch_size")
    return counts
