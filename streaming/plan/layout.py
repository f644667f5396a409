"""Canonical layout: shards (in a seeded order) cut into C spans of equal expected work.

The layout depends only on the run's seed and weights, never on the epoch, so each canonical
node keeps the same shards for the whole run and node-local caches stay warm. A shard may be cut
between two neighbouring canonical nodes; each such part is a *piece* (shard, rows [lo, hi)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streaming.errors import PlanError


@dataclass(frozen=True)
class Layout:
    """Pieces sorted by canonical node; `starts[c]:starts[c+1]` are canonical node c's pieces."""

    shard: np.ndarray  # int64 [pieces] shard index
    lo: np.ndarray  # int64 [pieces] first row in the shard
    hi: np.ndarray  # int64 [pieces] end row (exclusive)
    stream: np.ndarray  # int64 [pieces] stream of the shard
    starts: np.ndarray  # int64 [C + 1]

    @property
    def num_canonical(self) -> int:
        return len(self.starts) - 1

    def pieces_of(self, c: int) -> slice:
        return slice(int(self.starts[c]), int(self.starts[c + 1]))


def shard_streams(shards_per_stream: np.ndarray) -> np.ndarray:
    """Stream index of every shard."""
    return np.repeat(np.arange(len(shards_per_stream), dtype=np.int64), shards_per_stream)


def build_layout(
    samples_per_shard: np.ndarray,
    shards_per_stream: np.ndarray,
    rates: np.ndarray,
    num_canonical: int,
    shard_order: np.ndarray | None,
) -> Layout:
    """Cut shards (in `shard_order`, storage order if None) into `num_canonical` spans.

    `rates[s]` is the expected picks per sample of stream s this epoch, so spans hold equal
    expected numbers of picked samples rather than equal numbers of stored samples.
    """
    sizes = np.asarray(samples_per_shard, dtype=np.int64)
    streams = shard_streams(shards_per_stream)
    order = np.arange(len(sizes)) if shard_order is None else shard_order
    size_o = sizes[order]
    rate_o = np.asarray(rates, dtype=np.float64)[streams[order]]
    starts = np.concatenate(([0], np.cumsum(size_o)))
    work_end = np.cumsum(size_o * rate_o)
    total_work = float(work_end[-1]) if len(work_end) else 0.0
    if total_work <= 0:
        raise PlanError("the epoch has no samples: every stream is empty or weighted to zero")
    if np.all(rate_o == 1):  # unweighted: cut k sits at k * N // C exactly, as the reference's
        cuts = int(starts[-1]) * np.arange(1, num_canonical, dtype=np.int64) // num_canonical
    else:  # cut k sits in the shard whose cumulative work first reaches k/C of the total
        targets = total_work * np.arange(1, num_canonical) / num_canonical
        pos = np.minimum(np.searchsorted(work_end, targets, side="left"), len(sizes) - 1)
        before = np.where(pos > 0, work_end[pos - 1], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rows = np.where(rate_o[pos] > 0, np.rint((targets - before) / rate_o[pos]), 0)
        rows = np.clip(rows.astype(np.int64), 0, size_o[pos])
        cuts = np.maximum.accumulate(starts[pos] + rows) if len(pos) else pos
    # np.unique with return_index keeps numpy.ma (a slow lazy import) off the first batch's path
    piece_start = np.unique(np.concatenate((starts[:-1][size_o > 0], cuts)),
                            return_index=True)[0]
    piece_start = piece_start[piece_start < starts[-1]]
    piece_end = np.append(piece_start[1:], starts[-1])
    slot = np.searchsorted(starts, piece_start, side="right") - 1
    piece_end = np.minimum(piece_end, starts[slot + 1])
    canon = np.searchsorted(cuts, piece_start, side="right")
    shard = order[slot].astype(np.int64)
    bounds = np.searchsorted(canon, np.arange(num_canonical + 1), side="left")
    return Layout(
        shard=shard,
        lo=(piece_start - starts[slot]).astype(np.int64),
        hi=(piece_end - starts[slot]).astype(np.int64),
        stream=streams[shard],
        starts=bounds.astype(np.int64),
    )
