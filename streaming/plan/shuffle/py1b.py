"""py1b: shuffle shard order, then samples within fixed-size blocks of the node's sequence."""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import shuffle_blocks, shuffled_pieces


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Blocks of exactly `block_size` samples (the last may be shorter)."""
    values, _ = shuffled_pieces(values, bounds, rng)
    shuffle_blocks(values, max(int(block_size), 1), rng)
    return values
