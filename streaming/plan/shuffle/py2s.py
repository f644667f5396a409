"""py2s: py1s, then a second shuffle over shard-sized windows at a random offset.

The second pass mixes each shard's tail with its neighbour's head, so consecutive batches are
not confined to a single shard while at most two shards need to be resident at once.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import py1s
from streaming.plan.shuffle.pieces import shuffle_segments
from streaming.plan.traits import ShuffleAlgorithm


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Two-level shard shuffle; windows are the mean piece length."""
    values = py1s.shuffle(values, bounds, rng, block_size)
    total = len(values)
    if total == 0:
        return values
    window = max(int(total // max(len(bounds) - 1, 1)), 1)
    offset = int(rng.integers(0, window))
    cuts = np.unique(np.concatenate(([0], np.arange(offset, total, window), [total])))
    shuffle_segments(values, cuts, rng)
    return values


# Windows straddle two shards per canonical node, plus drift between canonical nodes (see py1s).
ALGORITHM = ShuffleAlgorithm("py2s", shuffle, canonical_per_node=64, shards_per_canonical=3.0)
