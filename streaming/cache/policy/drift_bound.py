"""How far a reader may run ahead of the slowest reader of its job on the node. Pure.

The minimum limit (`minimum_limit`) holds the shards the node's readers read at one batch, with
the readers in lock-step. Readers that drift apart read the shards of several batches at once
between them, and once those no longer fit the limit, each reader's downloads evict the shards
the readers behind it are about to read, which are downloaded again; before that, they crowd
out the shards the plan reads again later, which the limit's room over the minimum keeps for
the readers in lock-step. So a reader more than `D` batches ahead of the slowest running reader
of its job waits for it, where `D` is the most batches whose shards, for every block of `D + 1`
batches of the node's plan, take at most the minimum plus half the limit's room over it
(`drift_batches`); the other half stays for what the readers read again and for prefetching.
`D` is at least `MIN_BATCHES`: the DataLoader workers of one rank run up to
its `prefetch_factor` batches apart by design, and a smaller bound would have them wait for
each other for nothing.
"""

from __future__ import annotations

import numpy as np

from streaming.cache.policy.minimum_limit import Footprint, minimum_limit

MIN_BATCHES = 4  # a DataLoader's workers run up to prefetch_factor (2 by default) batches apart
MAX_BATCHES = 64
PLAN_STEPS = 1 << 16  # samples of each reader's plan the bound is derived from


def drift_batches(node_ids: np.ndarray, footprint: Footprint, shard_starts: np.ndarray,
                  unit: int, limit: int, other_bytes: int = 0) -> int:
    """The batches `D` a reader may lead the slowest reader of its job: the largest `D` (from
    `MIN_BATCHES` to `MAX_BATCHES`) such that the shards the node's readers read in each block
    of `D + 1` batches, with one being prepared, take at most the minimum limit (one batch's)
    plus half the room `limit` leaves over it, beside `other_bytes`; derived from the first
    `PLAN_STEPS` samples of each reader's plan.

    Args:
        node_ids: the node plan's global sample ids [ranks, workers, n] (-1 padding).
        footprint: the bytes of each shard in the cache.
        shard_starts: the first sample id of each shard.
        unit: samples a reader reads at a step (the plan's batch size).
        limit: the node's cache_limit in bytes.
        other_bytes: bytes of the other files in the cache folders.
    """
    ids = np.asarray(node_ids, np.int64)[..., :PLAN_STEPS]
    unit = max(int(unit), 1)

    minimum = minimum_limit(ids, footprint, shard_starts, unit).bytes
    budget = minimum + max(limit - other_bytes - minimum, 0) // 2

    def fits(batches: int) -> bool:
        return minimum_limit(ids, footprint, shard_starts, unit * (batches + 1)).bytes <= budget

    good = MIN_BATCHES
    if not fits(good):
        return good
    bad = None
    while bad is None and good < MAX_BATCHES:
        nxt = min(2 * good, MAX_BATCHES)
        if fits(nxt):
            good = nxt
        else:
            bad = nxt
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return good


def lead_over_slowest(job: int, pass_no: int, step: int, jobs: np.ndarray, passes: np.ndarray,
                      steps: np.ndarray) -> int:
    """Steps a reader at `step` of pass `pass_no` is ahead of the slowest other reader of its
    job that is reading (0 when none is behind). A reader still in an earlier pass is behind by
    at least the whole of this pass so far.

    Args:
        job: the reader's job (0: none; such a reader is never held back).
        pass_no: its pass (epoch + 1).
        step: its step in the pass.
        jobs: each running reader's job.
        passes: each one's pass (0: not reading).
        steps: each one's step in its pass.
    """
    if not job:
        return 0
    jobs, passes, steps = (np.asarray(a, np.int64) for a in (jobs, passes, steps))
    same = (jobs == job) & (passes > 0)
    lead = 0
    if (same & (passes < pass_no)).any():
        lead = step
    level = same & (passes == pass_no)
    if level.any():
        lead = max(lead, step - int(steps[level].min()))
    return max(lead, 0)
