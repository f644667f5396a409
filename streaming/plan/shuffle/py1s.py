"""py1s: shuffle the order of shards, then the samples inside each shard (one shard at a time)."""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import shuffle_segments, shuffled_pieces


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Pieces in random order, each piece's samples permuted among themselves."""
    values, bounds = shuffled_pieces(values, bounds, rng)
    shuffle_segments(values, bounds, rng)
    return values
