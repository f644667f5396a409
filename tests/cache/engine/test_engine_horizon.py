"""The horizon an engine's reader publishes for eviction: each shard's next use as the reader
moves, withdrawn when its pass ends, reaching the next block's shards, and published by a forked
reader whose first call is `follow`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.table import node_table as tb
from tests.cache.helpers import engine_source, open_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory)


def _open(source: Path, cache: Path):
    return open_dataset(str(source), str(cache))


def _following(source: Path, cache: Path, seq: np.ndarray) -> CacheEngine:
    """An engine whose reader follows `seq`, its prefetching stopped (horizons only)."""
    engine = CacheEngine(_open(source, cache).preparer, predownload=1, prefetch_threads=1)
    engine.follow(seq)
    engine.stop()
    return engine


def test_the_published_horizon_gives_each_shard_its_next_use(source, tmp_path):
    from streaming.cache.policy.eviction import NEVER
    from streaming.cache.table.reader_horizon import snapshot

    engine = _following(source, tmp_path / "c", np.array([0] * 3 + [1] * 10 + [0] * 3 + [2] * 3))
    table, slot = engine.table, engine.slot.index

    def distances() -> list[int]:
        return snapshot(table, np.array([slot])).next_use(table.num_shards)[:4].tolist()

    assert distances() == [0, 3, 16, NEVER]
    engine.advance(10)  # inside shard 1's run; shard 0 comes back at 13
    assert distances() == [3, 0, 6, NEVER]
    engine.advance(17)
    assert distances() == [NEVER, NEVER, 0, NEVER]
    engine.close()


def test_a_pass_that_ended_withdraws_its_horizon(source, tmp_path):
    from streaming.cache.table.reader_horizon import snapshot

    engine = _following(source, tmp_path / "c", np.array([0] * 3 + [1] * 10))
    rows = np.array([engine.slot.index])
    assert snapshot(engine.table, rows).shards[0, :2].tolist() == [0, 1]  # stop() keeps it
    engine.end()  # the reader's pass is over: nothing it would read is wanted any more
    assert (snapshot(engine.table, rows).shards < 0).all()
    engine.close()


def test_a_shard_read_again_later_keeps_its_next_use_after_each_run(source, tmp_path):
    from streaming.cache.table.reader_horizon import snapshot
    from tests.cache.table.test_horizon import true_next_use

    # shard 0 for three steps, shard 1 for two, shard 0 again from step 30
    seq = np.array([0] * 3 + [1] * 2 + [2] * 25 + [0] * 3)
    engine = _following(source, tmp_path / "c", seq)
    rows = np.array([engine.slot.index])
    for position in range(len(seq)):
        engine.advance(position)
        got = snapshot(engine.table, rows).next_use(engine.table.num_shards)[:3]
        assert got.tolist() == true_next_use(seq, position, 3).tolist(), position
    engine.close()


def test_the_next_blocks_shards_are_prefetched_far_beyond_predownload(source, tmp_path):
    import time

    from streaming.cache.table.reader_horizon import snapshot

    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, predownload=4, prefetch_threads=2)
    rng = np.random.default_rng(1)
    # shuffled blocks of 2,000 steps over shards 0-1, then 2-3, then 4-5
    seq = np.concatenate([rng.integers(0, 2, 2000), rng.integers(2, 4, 2000),
                          rng.integers(4, 6, 2000)])
    engine.follow(seq)
    table, slot = engine.table, engine.slot.index
    deadline = time.monotonic() + 30
    while (table.state[2:4] != tb.PRESENT).any() and time.monotonic() < deadline:
        time.sleep(0.01)
    # the reader is still at step 0: the next block's shards (two new shards: prefetch_threads)
    # are ready, and the horizon says when they are needed so eviction keeps them; the block
    # after that is beyond the lookahead
    assert (table.state[2:4] == tb.PRESENT).all()
    assert (table.state[4:6] == tb.ABSENT).all()
    d = snapshot(table, np.array([slot])).next_use(table.num_shards)
    assert d[2] == int(np.argmax(seq == 2)) and d[3] == int(np.argmax(seq == 3))
    engine.close()


def test_a_forked_reader_whose_first_call_is_follow_publishes_its_horizon(source, tmp_path):
    import os

    from streaming.cache.table.reader_horizon import snapshot

    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, predownload=4, prefetch_threads=1, cache_limit="1gb")
    engine.attach()  # the training process joins; its DataLoader worker is a fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            engine.follow(np.array([0] * 5 + [1] * 5 + [2] * 5))
            engine.stop()
            shards = snapshot(engine.table, np.array([engine.slot.index])).shards[0]
            os.write(write, bytes(shards[:3].astype(np.int8)))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    got = os.read(read, 3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0 and list(got) == [0, 1, 2]
    engine.close()


def test_evicting_a_shard_a_reader_still_needs_is_counted_and_warned_about_once(
        source, tmp_path, monkeypatch, caplog):
    import logging

    from streaming.cache.engine import cache_space as space_module
    from streaming.cache.engine.cache_space import BringOutcome

    handle = _open(source, tmp_path / "c")
    probe = CacheEngine(handle.preparer)
    fp, other = probe.space.footprint, probe.table.other_bytes
    probe.close()
    limit = 3 * int(fp.resident[:6].max()) + int(fp.transient[:6].max()) + other
    assert 4 * int(fp.resident[:6].min()) + other > limit  # any three shards fit, four do not
    engine = CacheEngine(handle.preparer, cache_limit=limit, prefetch_threads=1)
    second = CacheEngine(handle.preparer, cache_limit=limit, prefetch_threads=1)
    space = engine.space
    monkeypatch.setattr(space_module, "THRASHING_EVICTIONS", 2)
    # The reader reads shard 0 now, then 1, 2 and 3; nobody needs shard 4 or 5.
    shards, starts = np.array([0, 1, 2, 3]), np.array([0, 10, 20, 30])
    engine.slot.publish(shards, starts, starts + 10, 0)
    with caplog.at_level(logging.WARNING, logger="streaming.cache"):
        for shard in (0, 1, 4, 2):  # 2 evicts 4, which nobody needs
            assert space.bring(shard, -1) == BringOutcome.PRESENT
        assert (engine.stats().evictions, engine.stats().needed_evictions) == (1, 0)
        assert space.bring(3, -1) == BringOutcome.PRESENT  # evicts 2, needed at step 20
        assert (engine.stats().evictions, engine.stats().needed_evictions) == (2, 1)
        assert space.bring(2, -1) == BringOutcome.PRESENT  # evicts 3, needed at step 30
        stats = engine.stats()
        assert (stats.evictions, stats.needed_evictions) == (3, 2)
        assert "needed_evictions" in stats.as_dict() and "2 still needed" in str(stats)
        warned = [r.getMessage() for r in caplog.records if "still needed" in r.getMessage()]
        assert len(warned) == 1  # 2 of 3 evictions: more than half, and the threshold reached
        assert "2 of the node's 3 evictions" in warned[0] and f"cache_limit={limit}" in warned[0]
        # Once per node: neither this reader nor another of the node warns again.
        assert second.space.bring(5, -1) == BringOutcome.PRESENT  # evicts 2, still needed
        assert second.space.bring(3, -1) == BringOutcome.PRESENT
        assert second.stats().needed_evictions >= 3
        assert len([r for r in caplog.records if "still needed" in r.getMessage()]) == 1
    second.close()
    engine.close()
