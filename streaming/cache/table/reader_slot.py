"""One reader's slot in the node's `CacheTable`: claimed when the reader attaches, given back
when it closes. The slot's row holds the reader's pins, horizon (with its step) and counters;
only the reader owning it writes the row, so none of these needs the table's lock."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from streaming.cache.policy.drift_bound import lead_over_slowest
from streaming.cache.table import node_table as tb
from streaming.cache.table import reader_horizon as horizon
from streaming.cache.table.node_table import CacheTable
from streaming.cache.table.process_tables import forget_table, shared_table
from streaming.errors import CoordinationError

JOIN_TRIES = 10  # a table removed this often while joining it is a fault, not a race


@dataclass(frozen=True)
class ReaderSlot:
    """A reader's row of the node table.

    Args:
        table: the node table.
        index: the row's number.
    """

    table: CacheTable
    index: int
    _counting: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                      compare=False)  # the reader's threads share its counters

    @classmethod
    def join(cls, token: str, num_shards: int, init: Callable[[CacheTable], None], *,
             limit: int, downloads: int,
             on_dead_owner: Callable[[CacheTable, int], None]) -> ReaderSlot:
        """Take a free slot of the node table `token` (mapped once per process, created and
        filled by `init` when the node has none) and record the reader's cache_limit and
        download concurrency (0: no wish); `on_dead_owner(table, shard)` is called, under the
        table's lock, for each shard a dead former holder of the slot left mid-preparation.

        The last reader of a table removes it when it closes. A table mapped just before that
        is found removed here, under the lock, and the node's table is mapped again: every
        reader of a node shares one table.

        Args:
            token: the table's name (see `CacheTable.open`).
            num_shards: the shards the table describes.
            init: fills a table this call creates (from what is on disk).
            limit: the cache_limit this reader asks for, in bytes (0: none).
            downloads: the preparations at once this reader asks for (0: any number).
            on_dead_owner: resets a shard a dead reader was preparing.
        """
        for _ in range(JOIN_TRIES):
            table = shared_table(token, num_shards, init)
            with table.locked():
                if not table.removed():
                    index = table.claim_slot(functools.partial(on_dead_owner, table))
                    table.ask(index, limit, downloads)
                    return cls(table, index)
            forget_table(token, table)
        raise CoordinationError(f"the node cache table {token!r} was removed {JOIN_TRIES} times "
                                "while this reader joined it")

    def count(self, column: int, amount: int = 1) -> None:
        """Add to one of the slot's counters.

        Args:
            column: `table.HITS`, `table.MISSES`... (the counter's column of the slot row).
            amount: what to add.
        """
        with self._counting:
            self.table.count(self.index, column, amount)

    def pin(self, shard: int) -> None:
        """Mark `shard` held by this reader: eviction leaves it alone until `unpin`.

        Args:
            shard: the shard the reader is about to read.
        """
        pins = self.table.pins[self.index]
        free = np.flatnonzero(pins < 0)
        if not len(free):
            raise CoordinationError(
                f"reader holds {len(pins)} shards already ({pins.tolist()}); release one before "
                f"acquiring shard {shard}")
        pins[free[0]] = shard

    def unpin(self, shard: int) -> None:
        """Drop one pin of `shard` (none: nothing happens).

        Args:
            shard: a shard the reader is done with.
        """
        pins = self.table.pins[self.index]
        held = np.flatnonzero(pins == shard)
        if len(held):
            pins[held[0]] = -1

    def advance(self, position: int) -> None:
        """Record that the reader is at step `position` of its sequence (every run its published
        horizon lists must end after it: publish again when one has ended).

        Args:
            position: the reader's step.
        """
        horizon.move(self.table, self.index, position)

    def publish(self, shards: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                position: int) -> None:
        """Make the reader's horizon its next distinct `shards` (at most the table's
        `horizon`), the steps at which it starts and stops reading each, and its position.

        Args:
            shards: the shards, in the order the reader meets them.
            starts: the step of each one's first read.
            ends: the step after each one's last read in that run.
            position: the reader's step now.
        """
        horizon.publish(self.table, self.index, shards, starts, ends, position)

    def enter_pass(self, job: int, pass_no: int) -> None:
        """Record that the reader reads pass `pass_no` (epoch + 1) of job `job`; its step in
        the pass is its horizon's (`advance`, `publish`).

        Args:
            job: the reader's job (a hash of its dataset's job namespace; 0: none).
            pass_no: the pass, above 0.
        """
        row = self.table.slots[self.index]
        row[tb.JOB] = job
        row[tb.PASS] = pass_no

    def leave_pass(self) -> None:
        """The reader stopped reading: it holds no reader of its job back any longer."""
        self.table.slots[self.index, tb.PASS] = 0

    def lead(self, job: int, pass_no: int, position: int) -> int:
        """Steps this reader, at `position` of pass `pass_no`, is ahead of the slowest running
        reader of job `job` on the node (`drift_bound.lead_over_slowest`); readers that died
        or stopped reading do not count.

        Args:
            job: the reader's job.
            pass_no: its pass.
            position: its step.
        """
        table = self.table
        with table.locked():  # live_slots notes when it saw a holder running
            alive = table.live_slots(recent=True)
        alive[self.index] = False
        rows = table.slots[alive]
        return lead_over_slowest(job, pass_no, position, rows[:, tb.JOB], rows[:, tb.PASS],
                                 horizon.snapshot(table, alive).progress)

    def free(self) -> bool:
        """Give the slot back; True when no live reader is left on the table (caller holds the
        table's lock)."""
        self.table.free_slot(self.index)
        return not self.table.live_slots().any()
