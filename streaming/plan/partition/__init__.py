"""Partition schemes by name: which canonical-node counts a physical topology may use.

The global order never depends on the number of nodes; the scheme only decides whether a
topology is accepted. Node group q always serves positions p = s + q (mod groups).
"""

from __future__ import annotations

from collections.abc import Callable

from streaming.errors import PlanError

SCHEMES = ("orig", "relaxed")


def get_partition(name: str) -> Callable[[int, int], None]:
    """The topology check registered under `name`."""
    if name not in SCHEMES:
        raise PlanError(f"partition_algo {name!r} is unknown; choose one of {list(SCHEMES)}")
    return __import__(f"streaming.plan.partition.{name}", fromlist=["check"]).check


def compatible_counts(num_canonical: int, limit: int = 10_000) -> list[int]:
    """Node-group counts that divide, or are multiples of, `num_canonical` (up to `limit`)."""
    divisors = [n for n in range(1, num_canonical + 1) if num_canonical % n == 0]
    multiples = [num_canonical * k for k in range(2, limit // num_canonical + 1)][:4]
    return divisors + multiples
