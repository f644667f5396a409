"""naive: one uniform permutation of the whole epoch; best mixing, no shard locality."""

from __future__ import annotations

import numpy as np

from streaming.plan.traits import ShuffleAlgorithm


def shuffle(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
            block_size: int) -> np.ndarray:
    """A uniform permutation of all values (piece structure and block size are ignored)."""
    return rng.permutation(values)


ALGORITHM = ShuffleAlgorithm("naive", shuffle, shard_aware=False)
