"""Partition schemes by name: which canonical-node counts a physical topology may use.

The global order never depends on the number of nodes; the scheme only decides whether a
topology is accepted. Node group q always serves positions p = s + q (mod groups). Each module
exports its `SCHEME` record (streaming.plan.traits).
"""

from __future__ import annotations

from streaming.plan.partition import orig, relaxed
from streaming.plan.traits import PartitionScheme, registered

PARTITIONS: dict[str, PartitionScheme] = {
    "orig": orig.SCHEME,
    "relaxed": relaxed.SCHEME,
}
SCHEMES = tuple(PARTITIONS)


def partition_scheme(name: str) -> PartitionScheme:
    """The scheme registered under `name` (PlanError for unknown names)."""
    return registered(PARTITIONS, "partition_algo", name)
