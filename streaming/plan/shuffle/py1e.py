"""py1e (default): shuffle shard order, then spread each shard's samples over about one block.

Each sample gets an integer key: its shard's centre plus a uniform offset within a window of
max(shard length, block_size), clipped to the node's range; sorting by key interleaves
neighbouring shards smoothly, with no hard block edges, while a shard's samples stay within about
one block of each other (bounded cache residency).
"""

from __future__ import annotations

import numpy as np

from streaming.plan.shuffle import shuffled_pieces


def shuffle(lengths: np.ndarray, rng: np.random.Generator, block_size: int) -> np.ndarray:
    """Shard-order shuffle plus per-sample spreading, via one sort of packed integer keys."""
    positions, bounds = shuffled_pieces(lengths, rng)
    total = len(positions)
    if total < 2:
        return positions
    lens = np.diff(bounds)
    width = np.maximum(lens, max(block_size, 1))
    low = bounds[:-1] + (lens - width) // 2
    keys = np.repeat(low, lens)
    keys += (rng.random(total) * np.repeat(width, lens)).astype(np.int64)
    np.clip(keys, 0, total - 1, out=keys)
    bits = int(total - 1).bit_length()
    if 2 * bits <= 62:
        keys <<= bits
        keys |= np.arange(total, dtype=np.int64)
        keys.sort()
        keys &= (1 << bits) - 1
        return positions[keys]
    return positions[np.argsort(keys, kind="stable")]
