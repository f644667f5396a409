"""orig: canonical nodes must split evenly over node groups (or groups over canonical nodes).

Each node then reads exactly C / groups canonical nodes (or shares one), the best locality.
"""

from __future__ import annotations

from streaming.errors import PlanError
from streaming.plan.partition import compatible_counts


def check(num_canonical: int, num_groups: int) -> None:
    """PlanError unless one count divides the other, naming the node counts that work."""
    if num_canonical % num_groups and num_groups % num_canonical:
        raise PlanError(
            f"partition_algo='orig' needs num_canonical_nodes={num_canonical} to be a multiple "
            f"or a divisor of the {num_groups} data-parallel node groups; node counts that "
            f"work: {compatible_counts(num_canonical)}... (or use partition_algo='relaxed')"
        )
