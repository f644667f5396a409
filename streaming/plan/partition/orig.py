"""orig: canonical nodes must split evenly over node groups (or groups over canonical nodes).

Each node then reads exactly C / groups canonical nodes (or shares one), the best locality.
"""

from __future__ import annotations

from streaming.errors import PlanError
from streaming.plan.traits import PartitionScheme


def compatible_counts(num_canonical: int, limit: int = 10_000) -> list[int]:
    """Node-group counts that divide, or are multiples of, `num_canonical` (up to `limit`)."""
    divisors = [n for n in range(1, num_canonical + 1) if num_canonical % n == 0]
    multiples = [num_canonical * k for k in range(2, limit // num_canonical + 1)][:4]
    return divisors + multiples


def check(num_canonical: int, num_groups: int) -> None:
    """PlanError unless one count divides the other, naming the node counts that work."""
    if num_canonical % num_groups and num_groups % num_canonical:
        raise PlanError(
            f"partition_algo='orig' needs num_canonical_nodes={num_canonical} to be a multiple "
            f"or a divisor of the {num_groups} data-parallel node groups; node counts that "
            f"work: {compatible_counts(num_canonical)}... (or use partition_algo='relaxed')"
        )


SCHEME = PartitionScheme("orig", check, any_node_count=False)
