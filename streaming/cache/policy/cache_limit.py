"""A `cache_limit`, parsed once where it enters (the dataset's argument, `streaming plan`'s
config or option) into the bytes one process asks its node's cache folders never to exceed.

Every process sharing a node's cache folders records the limit it asked for in the node table;
the limit in force on the node is the smallest a live reader asked for (`NodeTable.node_limit`,
`CacheEngine.node_limit`). Fitting the plan uses the process's own `CacheLimit`: every process
of a job is given the same one, so every node fits the same plan. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming.errors import PlanError
from streaming.util.quantities import parse_bytes


@dataclass(frozen=True)
class CacheLimit:
    """The bytes this process asks its node's cache folders never to exceed.

    Args:
        nbytes: the limit in bytes (positive).
        given: the value as the user wrote it (`'10gb'`, `10_000_000_000`), for messages.
    """

    nbytes: int
    given: int | str

    @classmethod
    def parse(cls, value: LimitValue) -> CacheLimit | None:
        """The limit of a `cache_limit` argument (None: no limit); PlanError naming the value
        for one that is not a positive size (0 is refused rather than taken to mean anything:
        None is the way to say "no limit").

        Args:
            value: bytes as an int, a size such as "10gb", an already parsed limit, or None.
        """
        if value is None or isinstance(value, CacheLimit):
            return value
        try:
            nbytes = parse_bytes(value)
        except ValueError as exc:
            raise PlanError(f"cache_limit={value!r}: {exc}") from None
        if nbytes <= 0:
            raise PlanError(f"cache_limit must be a positive size such as '10gb', got {value!r} "
                            "(None, the default, means no limit)")
        return cls(nbytes, value)

    def room_for_shards(self, other_bytes: int) -> int:
        """Bytes left for shards beside `other_bytes` of other files (at least 1).

        Args:
            other_bytes: what the cache folders hold beside the shards (indexes, bookkeeping).
        """
        return max(self.nbytes - int(other_bytes), 1)

    def __str__(self) -> str:
        return str(self.given)


# What a `cache_limit` argument may be: bytes, a size such as "10gb", a parsed limit, or None.
LimitValue = CacheLimit | int | str | None
