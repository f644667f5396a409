"""Belady eviction over a known future: free space by dropping the cached shards whose next use
is farthest away, never one that is pinned by a reader or whose only copy is local. Pure numpy."""

from __future__ import annotations

import numpy as np

NEVER = np.iinfo(np.int64).max  # next-use distance of a shard nobody is known to need again


def next_use(horizon_shards: np.ndarray, horizon_steps: np.ndarray, progress: np.ndarray,
             num_shards: int) -> np.ndarray:
    """Per shard, the fewest steps until any reader needs it again (NEVER if none will).

    `horizon_shards[r, k]` / `horizon_steps[r, k]` are the upcoming shards of reader r and the
    step (in r's own sample count) at which each is first needed; -1 shards are padding.
    `progress[r]` is where reader r is now. Readers advance roughly in lock-step, so steps of
    different readers are comparable once made relative to their own progress.
    """
    shards = np.asarray(horizon_shards, np.int64)
    dist = np.asarray(horizon_steps, np.int64) - np.asarray(progress, np.int64)[:, None]
    valid = shards >= 0
    out = np.full(num_shards, NEVER, np.int64)
    np.minimum.at(out, shards[valid], np.maximum(dist[valid], 0))
    return out


def choose_victims(
    need: int,
    free: int,
    *,
    sizes: np.ndarray,
    evictable: np.ndarray,
    distance: np.ndarray,
    farther_than: int = -1,
) -> np.ndarray | None:
    """Shards to evict so that `free + their sizes >= need`, farthest next use first.

    `evictable` marks shards that may go (present, unpinned, with a remote copy). Only shards
    whose `distance` exceeds `farther_than` qualify: a prefetch must not evict what is needed
    before the shard it brings in, while a reader that needs a shard now passes -1. Among equal
    distances the bigger shard goes first (fewer evictions). Returns None if even every
    qualifying shard together would not free enough, and an empty array if nothing need go.
    """
    if free >= need:
        return np.zeros(0, np.int64)
    candidates = np.flatnonzero(np.asarray(evictable, bool)
                                & (np.asarray(distance) > farther_than))
    if not len(candidates):
        return None
    sz = np.asarray(sizes, np.int64)[candidates]
    order = np.lexsort((-sz, -np.asarray(distance)[candidates]))
    freed = free + np.cumsum(sz[order])
    enough = int(np.searchsorted(freed, need, side="left"))
    if enough >= len(order):
        return None
    return candidates[order[: enough + 1]].astype(np.int64)
