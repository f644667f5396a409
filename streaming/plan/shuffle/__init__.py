"""Shuffle algorithms by the name users put in configs.

Each algorithm maps a canonical node's piece lengths (pieces in canonical order) and a seeded
generator to a permutation of positions [0, total). Shard-aware algorithms only reorder within
one canonical node; `naive` is applied once to the whole epoch instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from streaming.errors import PlanError

ShuffleFn = Callable[[np.ndarray, np.random.Generator, int], np.ndarray]

SHARD_AWARE = ("py1s", "py2s", "py1b", "py1br", "py1e")
ALGORITHMS = ("naive", *SHARD_AWARE)


def get_shuffle(name: str) -> ShuffleFn:
    """The shuffle function registered under `name` (PlanError for unknown names)."""
    if name not in ALGORITHMS:
        raise PlanError(f"shuffle_algo {name!r} is unknown; choose one of {list(ALGORITHMS)}")
    module = __import__(f"streaming.plan.shuffle.{name}", fromlist=["shuffle"])
    return module.shuffle


def positions_in_order(lengths: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Positions of pieces laid out in `order` (pieces originally consecutive, in index order)."""
    starts = np.concatenate(([0], np.cumsum(lengths)))[:-1]
    lens = lengths[order]
    total = int(lens.sum())
    out_starts = np.concatenate(([0], np.cumsum(lens)))[:-1]
    return np.repeat(starts[order] - out_starts, lens) + np.arange(total, dtype=np.int64)


def shuffle_segments(values: np.ndarray, bounds: np.ndarray, rng: np.random.Generator) -> None:
    """Shuffle `values` in place within each segment [bounds[i], bounds[i+1])."""
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if b - a > 1:
            rng.shuffle(values[a:b])


def shuffled_pieces(lengths: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Positions with piece order permuted, and the permuted pieces' bounds."""
    order = rng.permutation(len(lengths))
    lens = lengths[order]
    return positions_in_order(lengths, order), np.concatenate(([0], np.cumsum(lens)))
