"""How far ahead of a reader the prefetcher looks, in runs of its shard sequence. Pure numpy.

A window of `predownload` samples is not enough on its own: in a shuffled block the next block's
shards appear only in its last few samples, so a reader would stall at every block boundary while
they download. The window therefore also reaches the next `ahead` shards that are not in it,
however far away they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReaderRuns:
    """A reader's shard sequence as runs: run i reads `shard[i]` over steps
    [start[i], end[i]); `previous` and `entries` as `previous_runs` and `entry_runs` give."""

    start: np.ndarray
    shard: np.ndarray
    end: np.ndarray
    previous: np.ndarray
    entries: np.ndarray
    length: int

    @classmethod
    def of(cls, shards: np.ndarray, gap: int) -> ReaderRuns:
        """The runs of a sequence with one shard id per step; `gap` as in `entry_runs`."""
        seq = np.asarray(shards, np.int64).reshape(-1)
        if not len(seq):
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, empty, empty, 0)
        start = np.concatenate([[0], np.flatnonzero(np.diff(seq) != 0) + 1]).astype(np.int64)
        end = np.append(start[1:], len(seq)).astype(np.int64)
        shard = seq[start]
        prev = previous_runs(shard)
        return cls(start, shard, end, prev, entry_runs(prev, start, end, gap), len(seq))


def previous_runs(run_shard: np.ndarray) -> np.ndarray:
    """For each run, the index of the previous run of the same shard (-1 for its first)."""
    n = len(run_shard)
    order = np.argsort(run_shard, kind="stable")  # by shard, then by position
    prev = np.full(n, -1, np.int64)
    if n > 1:
        same = run_shard[order[1:]] == run_shard[order[:-1]]
        prev[order[1:][same]] = order[:-1][same]
    return prev


def entry_runs(prev: np.ndarray, run_start: np.ndarray, run_end: np.ndarray,
               gap: int) -> np.ndarray:
    """Indices of the runs whose shard is new to the reader: never read before, or last read
    more than `gap` steps before the run starts (it may have been evicted since). Ascending.

    `prev` comes from `previous_runs`; run i covers steps [run_start[i], run_end[i])."""
    first = prev < 0
    entry = first.copy()
    again = np.flatnonzero(~first)
    entry[again] = run_start[again] - run_end[prev[again]] > gap
    return np.flatnonzero(entry).astype(np.int64)


def next_new(entries: np.ndarray, prev: np.ndarray, lo: int, hi: int, ahead: int,
             scan: int = 4096) -> np.ndarray:
    """The first `ahead` entries at or after run `hi` whose shard was not read since run `lo`
    (looking at `scan` entries at most): shards new to the window [lo, hi), each once, since a
    second entry of a shard has its previous run at or after the first."""
    if ahead <= 0:
        return np.zeros(0, np.int64)
    j = int(np.searchsorted(entries, max(lo + 1, hi), side="left"))  # runs before hi are in it
    found = np.zeros(0, np.int64)
    chunk = 64
    while j < len(entries) and scan > 0 and len(found) < ahead:
        runs = entries[j:j + chunk]
        found = np.concatenate([found, runs[prev[runs] < lo]])[:ahead]
        j, scan, chunk = j + chunk, scan - chunk, chunk * 2
    return found


def window_end(entries: np.ndarray, prev: np.ndarray, lo: int, hi: int, ahead: int) -> int:
    """The end (exclusive run index) of a prefetch window that starts at run `lo`, covers at
    least runs [lo, hi) and reaches the next `ahead` shards new to it."""
    far = next_new(entries, prev, lo, hi, ahead)
    return max(hi, int(far[-1]) + 1) if len(far) else hi


def prefetch_window(run_start: np.ndarray, entries: np.ndarray, prev: np.ndarray, position: int,
                    predownload: int, ahead: int) -> tuple[int, int]:
    """Runs [lo, hi) a prefetcher at step `position` prepares: from the current run through
    `predownload` steps, reaching the next `ahead` shards new to that window."""
    lo = max(int(np.searchsorted(run_start, position, side="right")) - 1, 0)
    hi = int(np.searchsorted(run_start, position + predownload, side="right"))
    return lo, window_end(entries, prev, lo, hi, ahead)


def horizon_runs(run_shard: np.ndarray, entries: np.ndarray, prev: np.ndarray, r0: int,
                 size: int, ahead: int, window: int = 16) -> np.ndarray:
    """The runs a reader at run `r0` announces to eviction (at most `size`): the first run of
    each of its next distinct shards among the next `window * size` runs, then the new shards
    its prefetcher reaches beyond them."""
    shards = run_shard[r0:r0 + window * size]
    _, first = np.unique(shards, return_index=True)
    near = np.sort(first)[:size] + r0
    far = next_new(entries, prev, r0, r0 + len(shards), ahead)  # none of their shards is near
    return np.concatenate([near, far])[:size].astype(np.int64)
