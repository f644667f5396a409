"""Shuffle algorithms by the name users put in configs.

Each algorithm takes a canonical node's sample ids grouped by piece (pieces in canonical order,
`bounds` delimiting them) and a seeded generator, and returns the ids in a new order.
Shard-aware algorithms only reorder within one canonical node; `naive` is applied once to the
whole epoch instead. Each module exports its `ALGORITHM` record (streaming.plan.traits).
"""

from __future__ import annotations

from streaming.plan.shuffle import naive, py1b, py1br, py1e, py1s, py2s
from streaming.plan.traits import ShuffleAlgorithm, ShuffleFn, registered

SHUFFLES: dict[str, ShuffleAlgorithm] = {
    "naive": naive.ALGORITHM,
    "py1s": py1s.ALGORITHM,
    "py2s": py2s.ALGORITHM,
    "py1b": py1b.ALGORITHM,
    "py1br": py1br.ALGORITHM,
    "py1e": py1e.ALGORITHM,
}
ALGORITHMS = tuple(SHUFFLES)


def shuffle_algorithm(name: str) -> ShuffleAlgorithm:
    """The shuffle registered under `name` (PlanError for unknown names)."""
    return registered(SHUFFLES, "shuffle_algo", name)


def get_shuffle(name: str) -> ShuffleFn:
    """The shuffle function registered under `name` (PlanError for unknown names)."""
    return shuffle_algorithm(name).shuffle
