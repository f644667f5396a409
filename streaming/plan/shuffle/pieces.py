"""Helpers the shuffle algorithms share: laying out and shuffling runs of sample ids."""

from __future__ import annotations

import numpy as np


def index_dtype(total: int) -> type:
    """Narrowest signed integer type that indexes `total` positions (halves memory and time)."""
    return np.int32 if total < 2**31 else np.int64


def expand_runs(src_starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ranges [src_starts[i], src_starts[i] + lengths[i]) without a loop."""
    total = int(lengths.sum())
    dtype = index_dtype(int(src_starts.max(initial=0)) + total)
    dst_starts = np.cumsum(lengths) - lengths
    out = np.repeat((src_starts - dst_starts).astype(dtype), lengths)
    out += np.arange(total, dtype=dtype)
    return out


def positions_in_order(lengths: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Positions of pieces laid out in `order` (pieces originally consecutive, in index order)."""
    starts = np.cumsum(lengths) - lengths
    return expand_runs(starts[order], lengths[order])


def shuffle_segments(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator) -> None:
    """Shuffle `values` in place within each segment [bounds[i], bounds[i+1])."""
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if b - a > 1:
            rng.shuffle(values[a:b])


def shuffled_pieces(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """`values` with its pieces in a random order, and the reordered pieces' bounds."""
    lengths = np.diff(bounds)
    order = rng.permutation(len(lengths))
    lens = lengths[order]
    return values[positions_in_order(lengths, order)], np.concatenate(([0], np.cumsum(lens)))


def shuffle_blocks(values: np.ndarray, block: int, rng: np.random.Generator) -> None:
    """Shuffle `values` in place within consecutive blocks of `block` entries."""
    full = len(values) - len(values) % block
    body = values[:full].reshape(-1, block)
    rng.permuted(body, axis=1, out=body)
    rng.shuffle(values[full:])
