"""How far ahead of a reader the prefetcher looks, in runs of its shard sequence. Pure numpy.

A window of `predownload` samples is not enough on its own: in a shuffled block the next block's
shards appear only in its last few samples, so a reader would stall at every block boundary while
they download. The window therefore also reaches the next `ahead` shards that are not in it,
however far away they are.
"""

from __future__ import annotations

import numpy as np


def entry_runs(run_shard: np.ndarray, run_start: np.ndarray, length: int, gap: int) -> np.ndarray:
    """Indices of the runs whose shard is new to the reader: never read before, or last read
    more than `gap` steps before the run starts (it may have been evicted since).

    `run_shard[i]` is read from step `run_start[i]` until the next run starts (`length` ends the
    last run). Sorted ascending."""
    n = len(run_shard)
    if n == 0:
        return np.zeros(0, np.int64)
    shard = np.asarray(run_shard)
    key = shard.astype(np.int32) if int(shard.max()) < 2**31 else shard
    order = np.argsort(key, kind="stable")  # by shard, then by position
    ends = np.append(run_start[1:], length)
    same = np.zeros(n, bool)
    same[1:] = key[order[1:]] == key[order[:-1]]
    entry = np.ones(n, bool)
    later, earlier = order[1:][same[1:]], order[:-1][same[1:]]
    entry[later] = run_start[later] - ends[earlier] > gap
    return np.flatnonzero(entry).astype(np.int64)


def next_new(entries: np.ndarray, run_shard: np.ndarray, lo: int, hi: int, ahead: int,
             scan: int = 4096) -> np.ndarray:
    """Run indices where the first `ahead` distinct shards not read in runs [lo, hi) enter the
    sequence after them (looking at most `scan` entries ahead)."""
    if ahead <= 0 or not len(entries):
        return np.zeros(0, np.int64)
    j = int(np.searchsorted(entries, max(lo + 1, hi), side="left"))  # runs before hi are in it
    inside = np.unique(run_shard[lo:hi])
    found = np.zeros(0, np.int64)
    chunk = 64
    while j < len(entries) and scan > 0:
        runs = np.concatenate([found, entries[j:j + chunk]])
        shards = run_shard[runs]
        runs, shards = runs[~np.isin(shards, inside)], shards[~np.isin(shards, inside)]
        _, first = np.unique(shards, return_index=True)
        found = runs[np.sort(first)[:ahead]]
        if len(found) >= ahead:
            break
        j, scan, chunk = j + chunk, scan - chunk, chunk * 2
    return found


def window_end(entries: np.ndarray, run_shard: np.ndarray, lo: int, hi: int, ahead: int) -> int:
    """The end (exclusive run index) of a prefetch window that starts at run `lo`, covers at
    least runs [lo, hi) and reaches the next `ahead` shards new to it."""
    far = next_new(entries, run_shard, lo, hi, ahead)
    return max(hi, int(far[-1]) + 1) if len(far) else hi
