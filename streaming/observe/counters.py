"""What the metrics read of a dataset, as protocols: its node cache's counters (`CacheCounted`),
its reads' tally (`ReadCounted`) and, for the per-stream counts, its plan config and streams
(`PlannedStreams`). StreamingDataset has all three, PackedStreamingDataset the first two, a
plain torch dataset none: the metrics leave out what a dataset does not have."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from streaming.util.read_sink import ReadSink

if TYPE_CHECKING:
    from streaming.cache.table.cache_stats import CacheStats
    from streaming.plan import PlanConfig
    from streaming.stream import Stream


@dataclass(frozen=True)
class ReadTotals:
    """Counts of reads out of shards on local disk, summed with `+`.

    Args:
        bytes_read: the raw bytes of the rows read.
        rows: the rows read.
    """

    bytes_read: int = 0
    rows: int = 0

    def __add__(self, other: ReadTotals) -> ReadTotals:
        return ReadTotals(self.bytes_read + other.bytes_read, self.rows + other.rows)


class ReadCounts(Protocol):
    """A tally of reads out of shards on local disk (`streaming.read.shard_rows.ReadTally`).

    Args:
        bytes_read: the raw bytes of the rows read.
        rows: the rows read.
        sink: also told every count (None: nobody).
    """

    bytes_read: int
    rows: int
    sink: ReadSink | None


@runtime_checkable
class CacheCounted(Protocol):
    """A dataset whose shards a node cache serves, and that says what the cache did."""

    def cache_stats(self) -> CacheStats:
        """The cache's counters so far."""


@runtime_checkable
class ReadCounted(Protocol):
    """A dataset that tallies what its reads copied out of shards on local disk."""

    def read_tally(self) -> ReadCounts:
        """This process's tally (its sink set by a loader before its workers start)."""


class PlannedStreams(Protocol):
    """A dataset whose epoch is planned over streams mixed by weight.

    Args:
        config: the plan config (each stream's samples per epoch and first sample id).
        streams: the streams, in the config's order (their `name` keys the metrics).
    """

    config: PlanConfig
    streams: Sequence[Stream]
