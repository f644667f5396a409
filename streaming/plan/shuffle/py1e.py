"""py1e (default): shuffle shard order, then spread each shard's samples over about one block.

Each shard's samples land uniformly at random in a window of max(shard length, block_size)
positions centred on the shard's place (shifted inside the node's range, so nothing piles up at
the ends). Implemented without a sort: per-shard multinomial counts over buckets of the window,
runs laid out bucket by bucket, then a shuffle inside fixed chunks of the output. Samples within
a shard are permuted first, so a shard's rows land in random order. O(n), cache-friendly.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle.pieces import (
    expand_runs,
    shuffle_blocks,
    shuffle_segments,
    shuffled_pieces,
)
from streaming.plan.traits import ShuffleAlgorithm


def _bucket(block: int) -> int:
    """Bucket (and final chunk-shuffle) size: fine enough to keep the spreading shape."""
    return max(1, min(1024, block // 64))


def _window_counts(lens: np.ndarray, total: int, block: int, rng: np.random.Generator):
    """Runs (piece, bucket, count): how many of each piece's samples land in each bucket."""
    starts = np.cumsum(lens) - lens
    size = _bucket(block)
    width = np.minimum(np.maximum(lens, block), total)
    low = np.clip(starts + (lens - width) // 2, 0, total - width)
    pieces, buckets, counts = [], [], []
    for k in np.flatnonzero(lens).tolist():
        lo, hi = int(low[k]), int(low[k] + width[k])
        first, last = lo // size, (hi - 1) // size
        edges = np.arange(first, last + 2) * size
        edges[0], edges[-1] = lo, hi
        share = np.diff(edges) / (hi - lo)
        drawn = rng.multinomial(int(lens[k]), share)
        keep = np.flatnonzero(drawn)
        pieces.append(np.full(len(keep), k))
        buckets.append(keep + first)
        counts.append(drawn[keep])
    return np.concatenate(pieces), np.concatenate(buckets), np.concatenate(counts)


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Shard-order shuffle plus per-sample spreading over about one block."""
    values, bounds = shuffled_pieces(values, bounds, rng)
    total = len(values)
    if total < 2:
        return values
    shuffle_segments(values, bounds, rng)
    lens = np.diff(bounds)
    piece, bucket, count = _window_counts(lens, total, max(int(block_size), 1), rng)
    # Each piece hands out its (already permuted) samples to its buckets in bucket order.
    taken = np.cumsum(count) - count
    first_run = np.searchsorted(piece, np.arange(len(lens)))
    src = bounds[:-1][piece] + taken - taken[first_run[piece]]
    runs = np.lexsort((piece, bucket))
    out = values[expand_runs(src[runs], count[runs])]
    del values
    shuffle_blocks(out, _bucket(max(int(block_size), 1)), rng)
    return out


# Windows near the two ends of a node's range are shifted inside it, so 1.5 blocks' worth of
# shards overlap there (checked in tests/cache/policy/test_fit.py).
ALGORITHM = ShuffleAlgorithm("py1e", shuffle, block_spread=1.5, centred_windows=True)
