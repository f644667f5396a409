"""What each shuffle, partition and batching algorithm is, as a record its module exports.

Config validation, the planner and cache fitting read these traits instead of lists of names,
so adding an algorithm means writing one module and one registry entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from streaming.errors import PlanError

if TYPE_CHECKING:
    from streaming.plan.layout import Layout
    from streaming.plan.world import World

ShuffleFn = Callable[[np.ndarray, np.ndarray, np.random.Generator, int], np.ndarray]
Record = TypeVar("Record")
# (order, world, per-device batch, resume position) -> [batches, group ranks, batch], start
GroupBatchesFn = Callable[["EpochView", "World", int, int], tuple[np.ndarray, int]]
# (order, world, per-device batch, resume position) -> ids, padding mask, start
GlobalSequenceFn = Callable[["EpochView", "World", int, int],
                            tuple[np.ndarray, np.ndarray, int]]


@dataclass(frozen=True)
class ShuffleAlgorithm:
    """A shuffle and what planning and cache fitting need to know about it.

    shard_aware: reorders within one canonical node (False: applied once to the whole epoch).
    canonical_per_node: default canonical nodes per node group when the user sets none.
    block_spread: peak shards in use at once, in blocks' worth of samples (None: the algorithm
        ignores shuffle_block_size, so the cache cannot be fitted by the block).
    shards_per_canonical: peak shards in use at once per canonical node a node reads, for
        algorithms whose locality the canonical node count bounds (None: not such an algorithm).
    centred_windows: spreads each shard over a window of max(shard, block) samples centred on
        it, so a block smaller than a shard leaves that shard unmixed with its neighbours.
    """

    name: str
    shuffle: ShuffleFn
    shard_aware: bool = True
    canonical_per_node: int = 1
    block_spread: float | None = None
    shards_per_canonical: float | None = None
    centred_windows: bool = False

    @property
    def block_based(self) -> bool:
        """Whether shuffle_block_size bounds the shards in use (and the cache fits the block)."""
        return self.block_spread is not None


@dataclass(frozen=True)
class PartitionScheme:
    """A partition scheme: the check that a node count suits a canonical node count.

    any_node_count: every node count is accepted (only locality varies with it).
    """

    name: str
    check: Callable[[int, int], None]
    any_node_count: bool


@dataclass(frozen=True)
class BatchingMethod:
    """A batching method: the asking node group's batches, or the whole global sequence.

    needs_batch_size: the method cannot group an epoch without the per-device batch size.
    batch_aligned_resume: a resume position is rounded down to a global batch boundary.
    stream_shaped: each stream's samples are read as a sequence of their own, side by side
        (so a node reads one sequence per stream at once, not one mixed sequence).
    """

    name: str
    group_batches: GroupBatchesFn
    global_sequence: GlobalSequenceFn
    needs_batch_size: bool
    batch_aligned_resume: bool
    stream_shaped: bool = False


def registered(registry: Mapping[str, Record], option: str, name: str) -> Record:
    """The record `registry` holds under `name`; PlanError naming the config `option` and the
    known names when there is none."""
    if name not in registry:
        raise PlanError(f"{option} {name!r} is unknown; choose one of {list(registry)}")
    return registry[name]


class PlanSettings(Protocol):
    """What the algorithms read of the plan config (`PlanConfig` provides it)."""

    @property
    def shuffle(self) -> bool: ...
    @property
    def shuffle_seed(self) -> int: ...
    @property
    def sampling_method(self) -> str: ...
    @property
    def shuffle_algorithm(self) -> ShuffleAlgorithm | None: ...
    def block_size(self, num_canonical: int) -> int: ...


class EpochView(Protocol):
    """What the batching methods and the unit supply read of an epoch's order (`EpochOrder`
    provides it). Typed here, below the registries, so the algorithms do not depend on the
    order, which depends on the config, which looks the algorithms up by name."""

    cfg: PlanSettings
    epoch: int
    num_canonical: int
    span: int
    lengths: np.ndarray
    stream_counts: np.ndarray
    layout: Layout

    def picks(self, c: int) -> tuple[np.ndarray, np.ndarray]: ...
    def take(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def take_progression(self, first: int, step: int, count: int) -> np.ndarray: ...
