"""Bounded waits, the inter-process file lock, and the shared failure flag."""

from __future__ import annotations

import time

import numpy as np
import pytest

from streaming.coord import Deadline, FailureFlag, FileLock, wait_for
from streaming.errors import CoordinationError, DeadlineExceeded
from tests.coord import workers
from tests.coord.helpers import kill, start


def test_wait_returns_first_ready_value():
    calls = iter([None, False, 0, 5])
    assert wait_for(lambda: next(calls), what="x", timeout=5) == 0


def test_deadline_names_what_was_awaited():
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"0\.2 s for the moon"):
        wait_for(lambda: None, what="the moon", timeout=0.2)
    assert 0.2 <= time.monotonic() - began < 1.0
    with pytest.raises(ValueError, match="timeout"):
        Deadline(-1)


def test_flag_stops_a_wait_with_its_reason():
    flag = FailureFlag(np.zeros(64, np.uint8))
    ticks = iter(range(1000))

    def ready():
        if next(ticks) == 3:
            flag.set("worker 3 could not download shard.00007.mds")
        return None

    with pytest.raises(CoordinationError, match=r"shard\.00007\.mds") as info:
        wait_for(ready, what="a plan", timeout=5, flag=flag)
    assert not isinstance(info.value, DeadlineExceeded)


def test_dead_peer_stops_a_wait():
    with pytest.raises(CoordinationError, match="the leader died"):
        wait_for(lambda: None, what="a plan", timeout=5, alive=lambda: "the leader died")


def test_flag_first_reason_wins_and_is_truncated_to_its_buffer():
    buf = np.zeros(16 + 10, np.uint8)
    flag = FailureFlag(buf)
    assert flag.reason() is None
    flag.raise_if_set()
    assert flag.set("épée and more words")
    assert not flag.set("second")
    assert flag.reason().startswith("épée")
    assert len(flag.reason().encode()) <= 10
    with pytest.raises(CoordinationError, match="épée"):
        flag.raise_if_set("node 0")
    with pytest.raises(CoordinationError, match="uint8"):
        FailureFlag(np.zeros(64, np.int64))


def test_lock_excludes_within_a_process(tmp_path):
    path = tmp_path / "sds_lock"
    a, b = FileLock(path), FileLock(path)
    with a:
        assert not b.try_acquire()
        assert a.holder().pid == a.holder().pid  # written by the holder
    assert not path.exists()  # a released lock leaves nothing behind
    assert b.try_acquire()
    b.release()


@pytest.mark.slow
def test_lock_deadline_names_file_and_holder_then_frees_on_holder_death(tmp_path):
    path = tmp_path / "sds_lock"
    proc = start(workers.hold_lock, str(path))
    lock = FileLock(path)
    with pytest.raises(DeadlineExceeded, match=rf"{path}.*pid {proc.pid}"):
        lock.acquire(timeout=0.3)
    kill(proc)
    lock.acquire(timeout=2)
    assert lock.held and lock.holder().pid != proc.pid
    lock.release()
