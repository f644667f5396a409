"""Under a cache_limit, a reader more than `drift.steps` steps ahead of the slowest running
reader of its job waits for it; readers of other jobs, readers that stopped or died, and a
deadline end the wait (the bound: test_drift_bound.py; real ranks: tests/cli/test_plan_cost.py)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.policy.drift_bound import MIN_BATCHES
from tests.cache.helpers import engine_source, open_dataset

SAMPLES = 600
BOUND = 10


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory, SAMPLES)


@pytest.fixture
def handle(source, tmp_path):
    return open_dataset(str(source), str(tmp_path / "c"))


def _reader(handle, job: str | None = "job", wait: float = 30.0) -> CacheEngine:
    engine = CacheEngine(handle.preparer, cache_limit="10mb", job=job)
    engine.drift.steps, engine.drift.wait = BOUND, wait
    engine.follow(handle.locator.locate(np.arange(SAMPLES))[0])
    return engine


def _advancing(engine: CacheEngine, position: int) -> threading.Thread:
    thread = threading.Thread(target=engine.advance, args=(position,), daemon=True)
    thread.start()
    return thread


def _held_until(engine: CacheEngine, position: int, release: Callable[[], object]) -> None:
    """`engine.advance(position)` waits, and goes on once `release()` ran."""
    ahead = _advancing(engine, position)
    ahead.join(0.3)
    assert ahead.is_alive()
    release()
    ahead.join(5)
    assert not ahead.is_alive()


def _close(*engines: CacheEngine) -> None:
    for engine in engines:
        engine.close()


def test_a_reader_too_far_ahead_waits_for_the_slowest_reader_of_its_job(handle):
    slow, fast = _reader(handle), _reader(handle)
    slow.advance(0)
    fast.advance(BOUND)  # within the bound: no wait
    ahead = _advancing(fast, 50)
    ahead.join(0.5)
    assert ahead.is_alive()
    slow.advance(39)
    ahead.join(0.3)
    assert ahead.is_alive()
    slow.advance(40)
    ahead.join(5)
    assert not ahead.is_alive()
    _close(slow, fast)


def test_readers_of_another_job_and_readers_without_a_job_hold_no_one_back(handle):
    other, free, fast = _reader(handle, "another job"), _reader(handle, None), _reader(handle)
    other.advance(0)
    started = time.monotonic()
    fast.advance(300)
    free.advance(500)  # no job: never waits, though `fast` is far behind it
    assert time.monotonic() - started < 2
    _close(other, free, fast)


def test_a_reader_that_ended_its_pass_holds_no_one_back(handle):
    slow, fast = _reader(handle), _reader(handle)
    slow.advance(0)
    _held_until(fast, 200, slow.end)
    _close(slow, fast)


def _read_then_die(engine: CacheEngine, ready) -> None:
    engine.follow(np.zeros(10, np.int64))  # its own slot, at step 0
    engine.advance(0)
    ready.set()
    time.sleep(60)


def test_a_reader_that_died_holds_no_one_back(handle):
    fork = multiprocessing.get_context("fork")
    ready = fork.Event()
    dead = CacheEngine(handle.preparer, cache_limit="10mb", job="job")
    dead.drift.steps = BOUND
    child = fork.Process(target=_read_then_die, args=(dead, ready))
    child.start()
    assert ready.wait(30)
    fast = _reader(handle)
    _held_until(fast, 200, lambda: (os.kill(child.pid, 9), child.join(30)))
    _close(fast)


def test_a_reader_in_the_next_pass_waits_for_one_finishing_the_last(handle):
    slow = _reader(handle)
    slow.advance(500)  # alone in its pass so far
    fast = CacheEngine(handle.preparer, cache_limit="10mb", job="job")
    fast.drift.steps = BOUND
    fast.drift.begin(1)
    fast.follow(handle.locator.locate(np.arange(SAMPLES))[0])
    started = time.monotonic()
    fast.advance(BOUND)
    assert time.monotonic() - started < 2
    _held_until(fast, 50, slow.end)
    _close(slow, fast)


def test_the_wait_has_a_deadline_and_then_the_pass_goes_on_unbounded(handle, caplog):
    slow, fast = _reader(handle), _reader(handle, wait=0.3)
    slow.advance(0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="streaming.cache.engine.reader_drift"):
        fast.advance(100)
    assert 0.3 <= time.monotonic() - started < 5
    assert "waited 0.3 s for the slowest reader" in caplog.text
    started = time.monotonic()
    fast.advance(300)  # no more waiting this pass
    assert time.monotonic() - started < 0.3
    _close(slow, fast)


def test_the_plan_check_sets_the_bound_in_steps(handle):
    engine = CacheEngine(handle.preparer, cache_limit="10mb", job="job")
    engine.check_plan(np.arange(SAMPLES)[None, None], handle.locator.shard_starts, 8)
    assert engine.drift.steps is not None and engine.drift.steps % 8 == 0
    assert engine.drift.steps >= MIN_BATCHES * 8
    engine.close()
    unlimited = CacheEngine(handle.preparer, job="job")
    unlimited.check_plan(np.arange(SAMPLES)[None, None], handle.locator.shard_starts, 8)
    assert unlimited.drift.steps is None
    unlimited.close()


class _FailedNode:
    """A node failure flag already raised by another process."""

    def reason(self) -> str:
        return "rank 1 failed"

    def error(self, context: str = "") -> Exception:
        return RuntimeError(f"{context}: rank 1 failed")


def test_a_waiting_reader_stops_with_the_node_failure(handle):
    slow, fast = _reader(handle), _reader(handle)
    slow.advance(0)
    fast.flag = _FailedNode()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="slower readers: rank 1 failed"):
        fast.advance(100)
    assert time.monotonic() - started < 5  # not the 30 s wait
    _close(slow, fast)
