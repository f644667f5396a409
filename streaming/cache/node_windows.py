"""The prefetch windows of all of a node's simulated readers at one step, computed together.
Pure numpy.

Each reader's window is `lookahead.prefetch_window`'s: from its current run through
`predownload` steps, reaching its next `ahead` new shards. The readers' runs are laid end to end
so that one search places every reader at a step, and a window's far end (the scan for new
shards) is computed again only for the readers whose window moved since the last step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streaming.cache.lookahead import ReaderRuns, window_end
from streaming.plan.shuffle.pieces import expand_runs


class NodeWindows:
    """Where each of a node's readers is, and which runs its prefetcher covers, step by step.

    Args:
        readers: each reader's shard sequence as runs.
        predownload: samples each reader prepares ahead.
        ahead: new shards a prefetcher reaches beyond its `predownload` samples.
    """

    def __init__(self, readers: Sequence[ReaderRuns], predownload: int, ahead: int) -> None:
        self.readers = list(readers)
        self.predownload, self.ahead = int(predownload), int(ahead)
        count = np.array([len(r.start) for r in self.readers], np.int64)
        self.base = np.cumsum(count) - count  # each reader's first run in the joined arrays
        self.length = np.array([r.length for r in self.readers], np.int64)
        # Reader i's run starts are keyed i * span + start: ascending over the joined runs,
        # and a step plus predownload never reaches the next reader's keys.
        span = int(self.length.max(initial=0)) + self.predownload + 1
        self.offset = np.arange(len(self.readers), dtype=np.int64) * span
        joined = [np.zeros(0, np.int64)]
        self.keys = np.concatenate(joined + [r.start + o for r, o in zip(self.readers,
                                                                          self.offset.tolist())])
        self.shard = np.concatenate(joined + [r.shard for r in self.readers])
        self.start = np.concatenate(joined + [r.start for r in self.readers])
        self.lo = np.full(len(self.readers), -1, np.int64)
        self.hi = np.full(len(self.readers), -1, np.int64)
        self.end = np.zeros(len(self.readers), np.int64)
        self.active = np.zeros(len(self.readers), bool)

    def at(self, t: int) -> None:
        """Place every reader at step `t`: `active` marks those not done, `lo` the run each
        reads, and runs [lo, end) its prefetch window."""
        self.active = t < self.length
        lo = np.searchsorted(self.keys, self.offset + t, side="right") - 1 - self.base
        lo = np.maximum(lo, 0)
        hi = np.searchsorted(self.keys, self.offset + t + self.predownload,
                             side="right") - self.base
        moved = np.flatnonzero(self.active & ((lo != self.lo) | (hi != self.hi)))
        for i, a, b in zip(moved.tolist(), lo[moved].tolist(), hi[moved].tolist()):
            r = self.readers[i]
            self.end[i] = window_end(r.entries, r.previous, a, b, self.ahead)
        self.lo, self.hi = lo, hi

    def current(self) -> np.ndarray:
        """The shard each reader reads (-1: done)."""
        return np.where(self.active, self.shard[np.minimum(self.base + self.lo,
                                                           max(len(self.shard) - 1, 0))], -1)

    def candidates(self, t: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `wanted` shards in the readers' windows, reader by reader in window order: each
        one's shard, its distance from step `t` (0 once its run has begun) and its reader.

        Args:
            t: the step the readers are at (`at(t)` first).
            wanted: per shard, whether a prefetch would bring it (absent and cached).
        """
        size = np.where(self.active, self.end - self.lo, 0)
        runs = expand_runs(self.base + self.lo, size)
        shard = self.shard[runs]
        keep = np.asarray(wanted, bool)[shard]
        owner = np.repeat(np.arange(len(self.readers), dtype=np.int64), size)[keep]
        distance = np.maximum(self.start[runs[keep]] - t, 0)
        return shard[keep], distance, owner
