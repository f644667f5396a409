"""A reader's horizon in the node table, as other processes see it: its step and, for its next
shards, the steps at which it starts and stops reading each.

Each slot has two buffers and a version word. The reader fills the buffer the version does not
point at and then moves the version to it, so the buffer a reader of the table copies is
complete even while its owner is halfway through the next one (or was stopped there). A copy is
taken again when the version moved during it. Between publications the owner only writes its
step into the current buffer, and only while every run listed there is still ahead of or under
that step (`CacheEngine` republishes when its current run ends), so no shard that is read again
later ever looks finished to an evicting process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streaming.cache.policy.eviction import next_use
from streaming.cache.table.node_table import CacheTable

COPY_ATTEMPTS = 64  # copies of a row tried while its owner keeps publishing


@dataclass(frozen=True)
class Horizons:
    """A consistent copy of some readers' horizons.

    Args:
        shards: [readers, horizon] shard ids, -1 for none.
        starts: the step at which each reader starts reading each shard.
        ends: the step after which it stops (that run's end).
        progress: each reader's step.
    """

    shards: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    progress: np.ndarray

    def next_use(self, num_shards: int) -> np.ndarray:
        """Per shard, the fewest steps until one of these readers needs it (`evict.next_use`).

        Args:
            num_shards: the shards of the table.
        """
        return next_use(self.shards, self.starts, self.ends, self.progress, num_shards)


def publish(table: CacheTable, slot: int, shards: np.ndarray, starts: np.ndarray,
            ends: np.ndarray, position: int) -> None:
    """Write a reader's new horizon and step into its spare buffer and make it current (only
    the slot's owner calls this).

    Args:
        table: the node table.
        slot: the reader's slot.
        shards: its next shards, in the order it meets them (at most `table.horizon`).
        starts: the step of each one's first read.
        ends: the step after each one's last read in that run.
        position: the reader's step now.
    """
    version = int(table.horizon_versions[slot])
    h, n = table.horizon, len(shards)
    spare = table.horizon_buffers[slot, (version + 1) % 2]
    spare[0] = position
    spare[1:1 + h] = -1
    spare[1:1 + n] = shards
    spare[1 + h:1 + h + n] = starts
    spare[1 + 2 * h:1 + 2 * h + n] = ends
    table.horizon_versions[slot] = version + 1


def move(table: CacheTable, slot: int, position: int) -> None:
    """Record the reader's step in its current buffer (its listed runs must all end after it).

    Args:
        table: the node table.
        slot: the reader's slot.
        position: the reader's step now.
    """
    table.horizon_buffers[slot, int(table.horizon_versions[slot]) % 2, 0] = position


def snapshot(table: CacheTable, rows: np.ndarray) -> Horizons:
    """The current horizons of the slots `rows` (a mask or indices), each copied whole.

    Args:
        table: the node table.
        rows: the slots to read.
    """
    rows = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, np.int64)
    version = table.horizon_versions[rows].copy()
    copied = table.horizon_buffers[rows, version % 2].copy()
    for _ in range(COPY_ATTEMPTS):
        moved = np.flatnonzero(table.horizon_versions[rows] != version)
        if not len(moved):
            break
        version[moved] = table.horizon_versions[rows[moved]]
        copied[moved] = table.horizon_buffers[rows[moved], version[moved] % 2]
    h = table.horizon
    return Horizons(copied[:, 1:1 + h], copied[:, 1 + h:1 + 2 * h], copied[:, 1 + 2 * h:],
                    copied[:, 0])
