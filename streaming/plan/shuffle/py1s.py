"""py1s: shuffle the order of shards, then the samples inside each shard (one shard at a time)."""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle.pieces import shuffle_segments, shuffled_pieces
from streaming.plan.traits import ShuffleAlgorithm


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Pieces in random order, each piece's samples permuted among themselves."""
    values, bounds = shuffled_pieces(values, bounds, rng)
    shuffle_segments(values, bounds, rng)
    return values


# One shard at a time per canonical node; canonical nodes of unequal length drift apart in the
# interleaved order, so their shard changes overlap (checked on real plans in
# tests/cache/policy/test_fit.py). Many canonical nodes by default so the order mixes shards.
ALGORITHM = ShuffleAlgorithm("py1s", shuffle, canonical_per_node=64, shards_per_canonical=2.0)
