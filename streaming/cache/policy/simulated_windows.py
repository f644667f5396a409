"""The prefetch windows of all of a node's simulated readers at one step, computed together.
Pure numpy.

Each reader's window is `lookahead.prefetch_window`'s: from its current run through
`predownload` steps, reaching its next `ahead` new shards. The readers' runs are laid end to end
so that one search places every reader at many steps, and a window's far end (the scan for new
shards) is computed again only for the readers whose window moved since the step before. Every
run is also keyed by (reader, shard, run), so each reader's nearest shard still to fetch is
found without reading its whole window; while the wanted shards stay the same, one search
among the runs of wanted shards finds it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from streaming.cache.policy.lookahead import ReaderRuns, window_end
from streaming.plan.shuffle.pieces import expand_runs

SCANS = (16, 256)  # entries past a window looked at for every reader at once, then for the rest
NONE = np.iinfo(np.int64).max  # no run
PLACEMENTS = 1 << 14  # (step, reader) placements `walk` computes at once
LOOKUP_COST = 16  # one per-pair search against one run of a pass, roughly (a binary search)


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
        # Each reader's entry runs (`ReaderRuns.entries`), joined and keyed the same way.
        entries = [r.entries for r in self.readers]
        # Run indices are keyed reader * stride + run (stride exceeds any reader's runs).
        self.stride = stride = int(count.max(initial=0)) + 2
        self.entry_keys = np.concatenate(joined + [e + i * stride for i, e in enumerate(entries)])
        self.entry_run = np.concatenate(joined + entries)
        self.entry_stop = np.cumsum([len(e) for e in entries]).astype(np.int64)
        self.previous = np.concatenate(joined + [r.previous for r in self.readers])
        # Every run of every reader keyed (reader, shard the node reads, run): a reader's next
        # run of a shard is one search away.
        self.node_shards = np.unique(self.shard)
        compact = np.searchsorted(self.node_shards, self.shard)
        owner = np.repeat(np.arange(len(self.readers), dtype=np.int64), count)
        self.occurrence = np.sort((owner * len(self.node_shards) + compact) * stride
                                  + (np.arange(len(self.shard)) - self.base[owner]))
        self.lo = np.full(len(self.readers), -1, np.int64)
        self.hi = np.full(len(self.readers), -1, np.int64)
        self.end = np.zeros(len(self.readers), np.int64)
        self.active = np.zeros(len(self.readers), bool)
        self._wanted = _WantedRuns()

    def at(self, t: int) -> None:
        """Place every reader at step `t`: `active` marks those not done, `lo` the run each
        reads, and runs [lo, end) its prefetch window."""
        self.active = t < self.length
        lo = np.searchsorted(self.keys, self.offset + t, side="right") - 1 - self.base
        lo = np.maximum(lo, 0)
        hi = np.searchsorted(self.keys, self.offset + t + self.predownload,
                             side="right") - self.base
        moved = np.flatnonzero(self.active & ((lo != self.lo) | (hi != self.hi)))
        if len(moved):
            self.end[moved] = self._window_ends(moved, lo[moved], hi[moved])
        self.lo, self.hi = lo, hi

    def walk(self, steps: np.ndarray) -> Iterator[int]:
        """Place the readers at each of `steps` (ascending) in turn, as `at` would, yielding
        each step once they are there; the placements of many steps are computed at once.

        Args:
            steps: the steps, ascending.
        """
        steps = np.asarray(steps, np.int64)
        per = max(PLACEMENTS // max(len(self.readers), 1), 1)
        for first in range(0, len(steps), per):
            part = steps[first:first + per]
            active, lo, hi, end = self._placements(part)
            for k, t in enumerate(part.tolist()):
                self.active, self.lo, self.hi, self.end = active[k], lo[k], hi[k], end[k]
                yield t

    def _placements(self, steps: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`active`, `lo`, `hi` and `end` ([steps, readers] each) after `at` at each of `steps`
        in turn, from where the readers are now."""
        count = len(steps)
        at = self.offset[:, None] + steps[None, :]  # reader by reader: ascending keys
        lo = (np.searchsorted(self.keys, at.ravel(), side="right").reshape(-1, count).T
              - 1 - self.base)
        lo = np.maximum(lo, 0)
        hi = (np.searchsorted(self.keys, (at + self.predownload).ravel(), side="right")
              .reshape(-1, count).T - self.base)
        active = steps[:, None] < self.length
        moved = active & ((lo != np.vstack([self.lo[None], lo[:-1]]))
                          | (hi != np.vstack([self.hi[None], hi[:-1]])))
        when, who = np.nonzero(moved)
        ends = np.zeros(moved.shape, np.int64)
        ends[when, who] = self._window_ends(who, lo[when, who], hi[when, who])
        # A reader whose window did not move keeps the end it had at its last move.
        last = np.maximum.accumulate(np.where(moved, np.arange(count)[:, None], -1), axis=0)
        readers = np.arange(len(self.readers))
        end = np.where(last >= 0, ends[np.maximum(last, 0), readers], self.end[None, :])
        return active, lo, hi, end

    def _window_ends(self, moved: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """`lookahead.window_end` of the `moved` readers: the entries past each window are
        looked at together, `SCANS[0]` of them, then `SCANS[1]` for the readers that did not
        meet `ahead` new shards among those, and a reader still short of them before its
        entries run out scans on alone."""
        end = hi.copy()
        if self.ahead <= 0:
            return end
        todo = np.arange(len(moved))
        for scan in SCANS:
            reach, settled = self._scan_ends(moved[todo], lo[todo], hi[todo], scan)
            end[todo[settled]] = reach[settled]
            todo = todo[~settled]
        for k in todo.tolist():
            r = self.readers[int(moved[k])]
            end[k] = window_end(r.entries, r.previous, int(lo[k]), int(hi[k]), self.ahead)
        return end

    def _scan_ends(self, moved: np.ndarray, lo: np.ndarray, hi: np.ndarray, scan: int
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Window ends from the first `scan` entries past each window, and whether each is
        settled (it met `ahead` new shards, or its reader's entries ran out)."""
        first = np.searchsorted(self.entry_keys, moved * self.stride
                                + np.maximum(lo + 1, hi), side="left")
        at = first[:, None] + np.arange(scan, dtype=np.int64)
        inside = at < self.entry_stop[moved][:, None]
        run = self.entry_run[np.minimum(at, max(len(self.entry_run) - 1, 0))]
        previous = self.previous[np.minimum(self.base[moved][:, None] + run,
                                            len(self.previous) - 1)]
        new = inside & (previous < lo[:, None])
        found = np.cumsum(new, axis=1)
        total = found[:, -1]
        last = np.argmax(found >= np.minimum(total, self.ahead)[:, None], axis=1)
        far = run[np.arange(len(moved)), last]
        settled = (total >= self.ahead) | ~inside[:, -1]
        end = np.where(settled & (total > 0), np.maximum(hi, far + 1), hi)
        return end, settled

    def current(self) -> np.ndarray:
        """The shard each reader reads (-1: done)."""
        if not len(self.shard):
            return np.full(len(self.readers), -1, np.int64)
        return np.where(self.active, self.shard[np.minimum(self.base + self.lo,
                                                           len(self.shard) - 1)], -1)

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

    def nearest(self, t: int, wanted: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Each reader's first `wanted` shard in its window (the one `candidates` lists first
        for it), for the readers that have one: shard, distance from step `t`, reader
        (ascending). Found by looking up, for each reader and each wanted shard the node reads,
        its next run from the window's start; None when those lookups would cost more than
        gathering the windows (`candidates`).

        Args:
            t: the step the readers are at (`at(t)` first).
            wanted: per shard, whether a prefetch would bring it (absent and cached).
        """
        wanted = np.asarray(wanted, bool)
        want = np.flatnonzero(wanted[self.node_shards])
        live = np.flatnonzero(self.active)
        if not len(want) or not len(live):
            empty = np.zeros(0, np.int64)
            return empty, empty, empty
        runs = self._wanted.runs(wanted, self.shard, lookups=len(live) * len(want))
        if runs is not None:
            return self._first_wanted(t, live, runs)
        if len(live) * len(want) > int((self.end - self.lo)[live].sum()):
            return None
        pair = live[:, None] * len(self.node_shards) + want[None, :]
        at = np.searchsorted(self.occurrence, pair * self.stride
                             + self.lo[live][:, None], side="left")
        key = self.occurrence[np.minimum(at, len(self.occurrence) - 1)]
        run = key % self.stride
        inside = ((at < len(self.occurrence)) & (key // self.stride == pair)
                  & (run < self.end[live][:, None]))
        run = np.where(inside, run, NONE)
        first = run.min(axis=1)
        met = first < NONE
        owner = live[met]
        runs = self.base[owner] + first[met]
        return self.shard[runs], np.maximum(self.start[runs] - t, 0), owner

    def _first_wanted(self, t: int, live: np.ndarray, wanted_runs: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`nearest` from the joined indices of every run of a wanted shard (ascending): each
        live reader's first one at or after its current run, if inside its window."""
        first = self.base[live] + self.lo[live]
        at = np.searchsorted(wanted_runs, first)
        run = wanted_runs[np.minimum(at, max(len(wanted_runs) - 1, 0))] if len(wanted_runs) \
            else np.zeros(len(live), np.int64)
        inside = (at < len(wanted_runs)) & (run < self.base[live] + self.end[live])
        runs = run[inside]
        return self.shard[runs], np.maximum(self.start[runs] - t, 0), live[inside]


class _WantedRuns:
    """The joined indices of the runs whose shard is wanted, kept while the wanted shards stay
    the same (they change only when the cache does). Building them costs a pass over every
    run, so they are built only once the per-pair lookups made since the last change would
    have cost as much (a cache that changes at most steps never pays for a pass)."""

    def __init__(self) -> None:
        self.key = b""
        self.looked = 0  # pair lookups made for `key` so far
        self.built: np.ndarray | None = None

    def runs(self, wanted: np.ndarray, shard: np.ndarray, *, lookups: int) -> np.ndarray | None:
        """The wanted runs for mask `wanted` over runs of `shard`, or None (look up per pair)
        while building them would cost more than the lookups made since the mask changed."""
        key = wanted.tobytes()
        if key != self.key:
            self.key, self.looked, self.built = key, 0, None
        if self.built is None:
            self.looked += lookups * LOOKUP_COST
            if self.looked < len(shard):
                return None
            self.built = np.flatnonzero(wanted[shard])
        return self.built
