"""py1b: shuffle shard order, then samples within fixed-size blocks of the node's sequence."""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle.pieces import shuffle_blocks, shuffled_pieces
from streaming.plan.traits import ShuffleAlgorithm


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Blocks of exactly `block_size` samples (the last may be shorter)."""
    values, _ = shuffled_pieces(values, bounds, rng)
    shuffle_blocks(values, max(int(block_size), 1), rng)
    return values


# Every shard changes at a block edge, where the next block's shards are fetched while the last
# of this block are still read: two blocks' worth in use (checked in
# tests/cache/policy/test_fit.py).
ALGORITHM = ShuffleAlgorithm("py1b", shuffle, block_spread=2.0)
