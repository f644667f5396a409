"""What other processes read of a reader's horizon: each shard's next use, right after every
step the reader reports, and never a half-written row while the reader publishes."""

from __future__ import annotations

import sys
import threading
import uuid

import numpy as np
import pytest

from streaming.cache.policy.eviction import NEVER
from streaming.cache.policy.lookahead import ReaderRuns, horizon_runs
from streaming.cache.table import node_table as tb
from streaming.cache.table.reader_horizon import snapshot


def true_next_use(seq: np.ndarray, position: int, num_shards: int) -> np.ndarray:
    """Per shard, steps from `position` to its next read at or after it (NEVER: none)."""
    out = np.full(num_shards, NEVER, np.int64)
    later = np.arange(position, len(seq))
    for shard in range(num_shards):
        hits = later[seq[position:] == shard]
        if len(hits):
            out[shard] = hits[0] - position
    return out


@pytest.fixture
def table():
    opened = tb.CacheTable.open(uuid.uuid4().hex[:12], 6, slots=2, horizon=16)
    yield opened
    opened.close()


def test_a_concurrent_observer_never_sees_a_half_published_horizon(table):
    from streaming.cache.table.reader_horizon import publish

    with table.locked():
        slot = table.claim_slot(lambda shard: None)
    rng = np.random.default_rng(3)
    seq = rng.integers(0, 6, 400).repeat(2)
    runs = ReaderRuns.of(seq, gap=1)
    rows = np.array([slot])
    stop = threading.Event()
    wrong: list[tuple[int, list[int], list[int]]] = []

    def observe() -> None:
        while not stop.is_set():
            seen = snapshot(table, rows)
            position = int(seen.progress[0])
            got = seen.next_use(6)
            want = true_next_use(seq, position, 6)
            near = want <= 12  # the horizon of 16 entries always covers these
            if not np.array_equal(got[near], want[near]):
                wrong.append((position, got.tolist(), want.tolist()))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # thread switches between any two writes of a publish
    watcher = threading.Thread(target=observe)

    def publish_at(position: int) -> None:
        r0 = max(int(np.searchsorted(runs.start, position, side="right")) - 1, 0)
        picked = horizon_runs(runs.shard, runs.entries, runs.previous, r0, 16, 0)
        publish(table, slot, runs.shard[picked], runs.start[picked], runs.end[picked], position)

    try:
        publish_at(0)
        watcher.start()
        for _ in range(3):
            for position in range(len(seq)):
                publish_at(position)
    finally:
        stop.set()
        watcher.join()
        sys.setswitchinterval(switch)
    assert not wrong, wrong[:3]
