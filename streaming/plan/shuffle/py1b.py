"""py1b: shuffle shard order, then samples within fixed-size blocks of the node's sequence."""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import shuffle_segments, shuffled_pieces


def shuffle(lengths: np.ndarray, rng: np.random.Generator, block_size: int) -> np.ndarray:
    """Blocks of exactly `block_size` positions (the last may be shorter)."""
    positions, _ = shuffled_pieces(lengths, rng)
    total = len(positions)
    cuts = np.append(np.arange(0, total, max(block_size, 1)), total)
    shuffle_segments(positions, cuts, rng)
    return positions
