"""py1s: shuffle the order of shards, then the samples inside each shard (one shard at a time)."""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import shuffle_segments, shuffled_pieces


def shuffle(lengths: np.ndarray, rng: np.random.Generator, block_size: int) -> np.ndarray:
    """Pieces in random order, each piece's samples permuted among themselves."""
    positions, bounds = shuffled_pieces(lengths, rng)
    shuffle_segments(positions, bounds, rng)
    return positions
