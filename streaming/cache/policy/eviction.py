"""Belady eviction over a known future: free space by dropping the cached shards whose next use
is farthest away, never one that is pinned by a reader or whose only copy is local. Pure numpy."""

from __future__ import annotations

import numpy as np

NEVER = np.iinfo(np.int64).max  # next-use distance of a shard nobody is known to need again


def next_use(horizon_shards: np.ndarray, horizon_starts: np.ndarray, horizon_ends: np.ndarray,
             progress: np.ndarray, num_shards: int) -> np.ndarray:
    """Per shard, the fewest steps until any reader needs it (0 while in use, NEVER if unknown).

    Row r describes reader r's upcoming shards: `horizon_shards[r, k]` is read from step
    `horizon_starts[r, k]` up to (excluding) `horizon_ends[r, k]`, in r's own sample count;
    -1 shards are padding. `progress[r]` is where reader r is now; runs it has finished count
    as unknown. Readers advance roughly in lock-step, so steps of different readers compare
    once made relative to their own progress.
    """
    shards = np.asarray(horizon_shards, np.int64)
    now = np.asarray(progress, np.int64)[:, None]
    dist = np.maximum(np.asarray(horizon_starts, np.int64) - now, 0)
    valid = (shards >= 0) & (np.asarray(horizon_ends, np.int64) > now)
    out = np.full(num_shards, NEVER, np.int64)
    np.minimum.at(out, shards[valid], dist[valid])
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

    `evictable` marks shards that may go (present, unpinned, with a remote copy). A reader that
    needs a shard now passes `farther_than` -1 (0: its run has begun), and any evictable shard
    not in use qualifies. A prefetch passes the distance of the use it brings its shard for
    (above 0), and only shards no reader is known to need again qualify: evicting one that is
    still needed, however far away, costs a download that fetching on demand avoids whenever
    shards finishing before the prefetched one's use would have freed the room by then (which
    is how the Belady optimum, fetching on demand, downloads less). Among equal distances the
    bigger shard goes first (fewer evictions). Returns None if even every qualifying shard
    together would not free enough, and an empty array if nothing need go.
    """
    if free >= need:
        return np.zeros(0, np.int64)
    dist = np.asarray(distance)
    qualifies = dist == NEVER if farther_than > 0 else dist > farther_than
    candidates = np.flatnonzero(np.asarray(evictable, bool) & qualifies)
    if not len(candidates):
        return None
    sz = np.asarray(sizes, np.int64)[candidates]
    order = np.lexsort((-sz, -np.asarray(distance)[candidates]))
    freed = free + np.cumsum(sz[order])
    enough = int(np.searchsorted(freed, need, side="left"))
    if enough >= len(order):
        return None
    return candidates[order[: enough + 1]].astype(np.int64)


def worth_bringing(shard: int, at: int, cost: int, *, distance: np.ndarray, sizes: np.ndarray,
                   wanted: np.ndarray, room: int, in_flight: int = 0) -> bool:
    """Whether a prefetch of `shard`, for a use `at` steps away, belongs in the cache now.

    It does when the `wanted` shards (the cached ones, present or not) next used sooner than it,
    at their `sizes`, leave `room` for its `cost`, beside the `in_flight` bytes preparations
    under way hold on top of their shards' sizes (their compressed copies). Otherwise the limit
    cannot hold it beside them: bringing it now would only see it evicted for one of them
    before its use, and downloaded twice. The prefetch waits instead, and nearer shards go
    first whichever reader's prefetcher reaches the limit first.
    """
    nearer = np.asarray(wanted, bool) & (np.asarray(distance) < at)
    nearer[shard] = False
    return int(np.asarray(sizes, np.int64)[nearer].sum()) + cost + max(in_flight, 0) <= room
