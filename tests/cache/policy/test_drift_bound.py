"""The drift bound, pure: how far a reader may lead the slowest reader of its job, and the lead
the node table's readers give it."""

from __future__ import annotations

import numpy as np

from streaming.cache.policy.drift_bound import (
    MAX_BATCHES,
    MIN_BATCHES,
    drift_batches,
    lead_over_slowest,
)
from streaming.cache.policy.minimum_limit import Footprint

SHARD = 1000  # bytes of each shard (no transient)
BATCH = 4


def _footprint(n: int) -> Footprint:
    return Footprint(np.full(n, SHARD, np.int64), np.zeros(n, np.int64))


def _plan(readers: int, batches: int) -> np.ndarray:
    """Each reader reads its own run of shards, one shard per batch: [1, readers, samples]."""
    ids = np.arange(readers * batches * BATCH).reshape(readers, batches * BATCH)
    return ids[None]


def test_the_bound_is_the_most_batches_taking_half_the_room_over_the_minimum():
    readers, batches = 2, 200
    ids, starts = _plan(readers, batches), np.arange(0, readers * batches * BATCH, BATCH)
    fp = _footprint(readers * batches)
    minimum = 2 * SHARD  # one batch of 2 readers: 2 shards
    # D + 1 batches of 2 readers hold 2 (D + 1) shards, which may take half the room over
    # the minimum: 2 (D + 1) SHARD <= minimum + (limit - minimum) / 2
    def limit(d: int) -> int:
        return 2 * (2 * (d + 1) * SHARD - minimum) + minimum

    assert drift_batches(ids, fp, starts, BATCH, limit(9)) == 9
    assert drift_batches(ids, fp, starts, BATCH, limit(10) - 1) == 9
    assert drift_batches(ids, fp, starts, BATCH, limit(10)) == 10
    # other files in the folders take their room first
    assert drift_batches(ids, fp, starts, BATCH, limit(10), other_bytes=2) == 9


def test_the_bound_stays_within_its_floor_and_ceiling():
    ids, starts = _plan(2, 400), np.arange(0, 2 * 400 * BATCH, BATCH)
    fp = _footprint(800)
    assert drift_batches(ids, fp, starts, BATCH, 2 * SHARD) == MIN_BATCHES  # the minimum
    assert drift_batches(ids, fp, starts, BATCH, 10**12) == MAX_BATCHES


def test_the_lead_is_over_the_slowest_reader_of_the_same_job_and_pass():
    jobs = np.array([7, 7, 7, 9])
    passes = np.array([1, 1, 1, 1])
    steps = np.array([40, 10, 30, 0])
    assert lead_over_slowest(7, 1, 50, jobs, passes, steps) == 40  # reader 1, not job 9's
    assert lead_over_slowest(7, 1, 5, jobs, passes, steps) == 0  # the slowest itself
    assert lead_over_slowest(9, 1, 50, jobs[:3], passes[:3], steps[:3]) == 0  # alone in job 9
    assert lead_over_slowest(0, 1, 50, jobs, passes, steps) == 0  # no job: never held back


def test_a_reader_that_stopped_reading_holds_no_one_back():
    jobs, steps = np.array([7, 7]), np.array([0, 45])
    assert lead_over_slowest(7, 1, 50, jobs, np.array([0, 1]), steps) == 5


def test_a_reader_still_in_an_earlier_pass_is_behind_the_whole_pass_so_far():
    seven = np.array([7])
    # at step 30 of pass 2, a reader at step 990 of pass 1 is behind
    assert lead_over_slowest(7, 2, 30, seven, np.array([1]), np.array([990])) == 30
    # at step 995 of pass 1, a reader at step 3 of pass 2 is ahead
    assert lead_over_slowest(7, 1, 995, seven, np.array([2]), np.array([3])) == 0
