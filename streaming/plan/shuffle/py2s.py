"""py2s: py1s, then a second shuffle over shard-sized windows at a random offset.

The second pass mixes each shard's tail with its neighbour's head, so consecutive batches are
not confined to a single shard while at most two shards need to be resident at once.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import shuffle_segments, shuffled_pieces


def shuffle(lengths: np.ndarray, rng: np.random.Generator, block_size: int) -> np.ndarray:
    """Two-level shard shuffle; windows are the mean piece length."""
    positions, bounds = shuffled_pieces(lengths, rng)
    shuffle_segments(positions, bounds, rng)
    total = len(positions)
    if total == 0:
        return positions
    window = max(int(total // max(len(lengths), 1)), 1)
    offset = int(rng.integers(0, window))
    cuts = np.unique(np.concatenate(([0], np.arange(offset, total, window), [total])))
    shuffle_segments(positions, cuts, rng)
    return positions
