"""Who is asking for samples: node, rank and DataLoader worker, plus replication groups."""

from __future__ import annotations

from dataclasses import dataclass

from streaming.errors import PlanError


@dataclass(frozen=True)
class World:
    """The training topology and the caller's place in it (all indices zero-based).

    `replication=k` makes k consecutive global ranks receive identical samples (tensor/sequence
    parallel groups); the data-parallel world is then `world_size // k` ranks.
    """

    num_nodes: int = 1
    ranks_per_node: int = 1
    workers_per_rank: int = 1
    node: int = 0
    rank_in_node: int = 0
    worker: int = 0
    replication: int = 1

    def __post_init__(self) -> None:
        for name in ("num_nodes", "ranks_per_node", "workers_per_rank", "replication"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                what = "Replication factor must be positive: " if name == "replication" else ""
                raise PlanError(f"{what}World.{name} must be a positive int, got {value!r}")
        for name, bound in (("node", self.num_nodes), ("rank_in_node", self.ranks_per_node),
                            ("worker", self.workers_per_rank)):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value < bound:
                raise PlanError(f"World.{name}={value!r} is outside [0, {bound})")
        k, r = self.replication, self.ranks_per_node
        if self.world_size % k or (r % k and k % r):
            raise PlanError(
                f"replication={k} must divide ranks_per_node={r} or be a multiple of it that "
                f"divides world_size={self.world_size}"
            )

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.ranks_per_node

    @property
    def rank(self) -> int:
        return self.node * self.ranks_per_node + self.rank_in_node

    @property
    def data_parallel_ranks(self) -> int:
        """Ranks that receive distinct samples."""
        return self.world_size // self.replication

    @property
    def data_parallel_rank(self) -> int:
        return self.rank // self.replication

    @property
    def num_groups(self) -> int:
        """Distinct sample streams at node level: nodes, or fewer when replicas span nodes."""
        return self.data_parallel_ranks // self.group_ranks

    @property
    def group_ranks(self) -> int:
        """Data-parallel ranks per node-level group."""
        return max(self.ranks_per_node // self.replication, 1)

    @property
    def group(self) -> int:
        """This node's group (nodes that are replicas of each other share one)."""
        return self.data_parallel_rank // self.group_ranks

    def with_position(self, node: int, rank_in_node: int = 0, worker: int = 0) -> World:
        """The same topology seen from another (node, rank, worker)."""
        return World(self.num_nodes, self.ranks_per_node, self.workers_per_rank,
                     node, rank_in_node, worker, self.replication)


def replication_factor(value: int | None) -> int:
    """The `replication` a dataset was given, checked: None means 1; anything but a positive
    int is a PlanError naming it (0 is refused, never taken to mean 1).

    Args:
        value: consecutive ranks that receive identical samples, or None.
    """
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlanError(f"Replication factor must be positive: replication={value!r} (the "
                        "consecutive ranks that receive the same samples: a positive int, or "
                        "None for 1)")
    return value
