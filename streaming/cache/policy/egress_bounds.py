"""The yardsticks a node's downloads are measured against, from the plan it already knows: the
floor (each shard its epoch reads, fetched once) and the Belady optimum (on every miss, evict
the cached shards whose next use is farthest away). Pure numpy and heapq. Both start from an
empty cache, or from the shards a cache already holds (`held`: a later epoch starts with what
the one before left).

The optimum's readers advance in lock-step, one sample per step each, as in `limit.py`'s
minimum: at step t every reader holds the shard of its t-th sample, and a shard is fetched when
a reader reaches it (fetching earlier cannot save a download). A shard being fetched costs its
resident bytes plus its transient ones (`Footprint.download_cost`) until it is in place.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streaming.cache.policy.minimum_limit import Footprint
from streaming.errors import CacheLimitError

NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Egress:
    """Downloads and bytes over the network for one node's epoch."""

    downloads: int
    bytes: int


def floor_egress(sequences: Sequence[np.ndarray], footprint: Footprint,
                 fetch_bytes: np.ndarray, held: np.ndarray | None = None) -> Egress:
    """Each cached shard the readers read and the cache does not hold at the start, fetched
    once.

    Args:
        sequences: each reader's shard per step (-1: idle).
        footprint: which shards are cached (resident bytes above zero).
        fetch_bytes: bytes a download of each shard moves.
        held: ids of the shards already in the cache at the start (None: it starts empty).
    """
    read = _read_shards(sequences)
    read = read[footprint.resident[read] > 0]
    if held is not None:
        read = np.setdiff1d(read, np.asarray(held, np.int64))
    return Egress(len(read), int(np.asarray(fetch_bytes, np.int64)[read].sum()))


def _read_shards(sequences: Sequence[np.ndarray]) -> np.ndarray:
    parts = [np.asarray(s, np.int64) for s in sequences] + [np.zeros(0, np.int64)]
    flat = np.concatenate(parts)
    return np.unique(flat[flat >= 0])


@dataclass(frozen=True)
class _Uses:
    """Every reader's runs as events sorted by step: at `step[k]` reader `reader[k]` starts
    reading `shard[k]` (-1: it has finished); `next_step[k]` is the step of the next event of
    the same shard (NEVER when there is none)."""

    step: np.ndarray
    reader: np.ndarray
    shard: np.ndarray
    next_step: np.ndarray

    @classmethod
    def of(cls, sequences: Sequence[np.ndarray]) -> _Uses:
        steps, readers, shards = [], [], []
        for r, seq in enumerate(sequences):
            seq = np.append(np.asarray(seq, np.int64).reshape(-1), -1)  # -1: done
            start = np.concatenate([[0], np.flatnonzero(np.diff(seq) != 0) + 1])
            steps.append(start)
            readers.append(np.full(len(start), r, np.int64))
            shards.append(seq[start])
        if not steps:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, empty)
        step, reader, shard = (np.concatenate(a) for a in (steps, readers, shards))
        order = np.lexsort((reader, step))
        step, reader, shard = step[order], reader[order], shard[order]
        by_shard = np.lexsort((step, shard))
        following = np.full(len(step), NEVER, np.int64)
        same = shard[by_shard[1:]] == shard[by_shard[:-1]]
        following[by_shard[:-1][same]] = step[by_shard[1:][same]]
        return cls(step, reader, shard, following)


def belady_egress(sequences: Sequence[np.ndarray], footprint: Footprint,
                  fetch_bytes: np.ndarray, limit: int | None, other_bytes: int = 0,
                  held: np.ndarray | None = None) -> Egress:
    """The fewest bytes a cache of `limit` bytes downloads for these readers when it always
    evicts the shards used farthest in the future.

    Args:
        sequences: each reader's shard per step (-1: idle).
        footprint: bytes per shard while cached and while being fetched.
        fetch_bytes: bytes a download of each shard moves.
        limit: the cache_limit in bytes (None: nothing is evicted, the floor).
        other_bytes: bytes of other files in the cache folders, counted against the limit.
        held: ids of the shards already in the cache at the start, within the limit (None:
            it starts empty); those not read are evicted first.
    """
    fetch = np.asarray(fetch_bytes, np.int64)
    if limit is None:
        return floor_egress(sequences, footprint, fetch, held)
    uses = _Uses.of(sequences)
    present = np.zeros(len(footprint.resident), bool)
    next_use = np.full(len(footprint.resident), NEVER, np.int64)
    current = np.full(len(sequences), -1, np.int64)
    heap: list[tuple[int, int]] = []  # (-next use, shard), stale entries skipped
    used, downloads, moved = int(other_bytes), 0, 0
    if held is not None:
        used += _hold(np.asarray(held, np.int64), uses, footprint, present, next_use, heap)
    bounds = np.flatnonzero(np.diff(uses.step)) + 1
    for group in np.split(np.arange(len(uses.step)), bounds):
        current[uses.reader[group]] = uses.shard[group]  # every reader's step, then the misses
        for k in group.tolist():
            shard = int(uses.shard[k])
            if shard < 0 or footprint.resident[shard] <= 0:
                continue
            next_use[shard] = int(uses.next_step[k])
            if not present[shard]:
                used = _make_room(footprint.download_cost(shard), limit, used, present,
                                  next_use, current, heap, footprint.resident, shard,
                                  int(uses.step[k]))
                present[shard] = True
                used += int(footprint.resident[shard])
                downloads += 1
                moved += int(fetch[shard])
            heapq.heappush(heap, (-int(next_use[shard]), shard))
    return Egress(downloads, moved)


def _hold(held: np.ndarray, uses: _Uses, footprint: Footprint, present: np.ndarray,
          next_use: np.ndarray, heap: list[tuple[int, int]]) -> int:
    """Mark the cached ones of `held` present, each due at its first use (NEVER when it is not
    read); the bytes they hold."""
    held = np.unique(held[footprint.resident[held] > 0])
    read = uses.shard >= 0
    np.minimum.at(next_use, uses.shard[read], uses.step[read])
    present[held] = True
    for shard in held.tolist():
        heapq.heappush(heap, (-int(next_use[shard]), shard))
    next_use[~present] = NEVER  # the others are set when they are first read
    return int(footprint.resident[held].sum())


def _make_room(cost: int, limit: int, used: int, present: np.ndarray, next_use: np.ndarray,
               current: np.ndarray, heap: list[tuple[int, int]], resident: np.ndarray,
               shard: int, step: int) -> int:
    """Evict farthest-next-use shards (never one a reader holds) until `cost` fits; the bytes
    held after."""
    held = set(current.tolist())
    kept: list[tuple[int, int]] = []
    while used + cost > limit:
        if not heap:
            raise CacheLimitError(
                f"cache_limit={limit} cannot hold shard {shard} beside the shards the readers "
                f"hold at step {step}")
        key, victim = heapq.heappop(heap)
        if not present[victim] or -key != next_use[victim]:
            continue  # stale entry
        if victim in held:
            kept.append((key, victim))
            continue
        present[victim] = False
        used -= int(resident[victim])
    for entry in kept:
        heapq.heappush(heap, entry)
    return used
