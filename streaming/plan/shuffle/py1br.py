"""py1br: like py1b but block sizes vary at random in [0.75, 1.25] x `block_size`.

Random block edges keep the boundaries from lining up with shard edges epoch after epoch.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle.pieces import shuffle_segments, shuffled_pieces
from streaming.plan.traits import ShuffleAlgorithm


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """Shard order shuffled, then samples within blocks of random size."""
    values, _ = shuffled_pieces(values, bounds, rng)
    total = len(values)
    low, high = max(block_size * 3 // 4, 1), max(block_size * 5 // 4, 1) + 1
    sizes = rng.integers(low, high, size=total // low + 1)
    cuts = np.concatenate(([0], np.cumsum(sizes)))
    cuts = np.append(cuts[cuts < total], total)
    shuffle_segments(values, cuts, rng)
    return values


# As py1b, with blocks up to 1.25x the block size.
ALGORITHM = ShuffleAlgorithm("py1br", shuffle, block_spread=2.5)
