"""relaxed (default): any node count works with any canonical node count.

Global batches stay identical (elastic determinism); only locality degrades when the counts do
not divide: a node then reads C / gcd(C, groups) canonical nodes instead of C / groups.
"""

from __future__ import annotations

from streaming.plan.traits import PartitionScheme


def check(num_canonical: int, num_groups: int) -> None:
    """Accept every topology (the global order does not depend on it)."""
    del num_canonical, num_groups


SCHEME = PartitionScheme("relaxed", check, any_node_count=True)
