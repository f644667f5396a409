"""NodeCoordinator across real processes: one leader, shared plans, failures that surface fast."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from streaming.coord import Namespace, NodeCoordinator
from streaming.errors import CoordinationError, DeadlineExceeded
from tests.coord import workers
from tests.coord.helpers import CTX, kill, start

REPO = Path(__file__).resolve().parents[2]


def job_env() -> dict[str, str]:
    """A launcher environment unique to one test (a fresh 'run id')."""
    return {"TORCHELASTIC_RUN_ID": uuid.uuid4().hex, "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500", "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "4"}


def test_leader_publishes_and_follower_reads_zero_copy(tmp_path):
    ns = Namespace.for_job([tmp_path])
    with NodeCoordinator.join(ns, timeout=5) as leader, \
            NodeCoordinator.join(ns, timeout=5) as follower:
        assert leader.is_leader and not follower.is_leader
        with leader.publishing(0, (2, 3), np.int64) as out:
            out[...] = 9
        view = follower.read(0, timeout=5)
        assert (view == 9).all() and not view.flags.writeable
        leader.publish(1, workers.plan_for(1))
        assert np.array_equal(follower.read(1, timeout=5), workers.plan_for(1))
        assert follower.published() == (2, 1)
        with pytest.raises(CoordinationError, match="replaced by epoch 1"):
            follower.read(0, timeout=5)
        with pytest.raises(CoordinationError, match="only the node leader"):
            follower.publish(2, np.zeros(3))


def test_failed_publication_is_never_seen(tmp_path):
    ns = Namespace.for_job([tmp_path])
    with NodeCoordinator.join(ns, timeout=5) as leader:
        with pytest.raises(ZeroDivisionError), leader.publishing(0, 4, np.int64) as out:
            out[:2] = 1
            raise ZeroDivisionError
        assert leader.published() == (0, 0)
        with pytest.raises(DeadlineExceeded, match="epoch 0"):
            leader.read(0, timeout=0.1)


def test_two_coordinators_on_the_same_dirs_in_one_process(tmp_path):
    env = job_env()
    a = NodeCoordinator.join(Namespace.for_job([tmp_path], env=env), timeout=5)
    b = NodeCoordinator.join(Namespace.for_job([tmp_path], env=env), timeout=5)
    try:
        assert a.ns != b.ns and a.is_leader and b.is_leader
        a.publish(0, np.arange(3))
        b.publish(0, np.arange(4))
        assert a.read(0).size == 3 and b.read(0).size == 4
    finally:
        a.close()
        b.close()


def test_clean_stale_shared_memory_is_reexported_at_top_level():
    import streaming
    from streaming.coord.shm import clean_stale_shared_memory

    assert streaming.clean_stale_shared_memory is clean_stale_shared_memory
    assert isinstance(clean_stale_shared_memory(), int)


def test_waiting_without_a_leader_names_the_namespace(tmp_path):
    ns = Namespace.for_job([tmp_path])
    with pytest.raises(DeadlineExceeded, match=f"node leader for {ns}"):
        NodeCoordinator.join(ns, lead=False, timeout=0.2)


@pytest.mark.slow
def test_four_local_ranks_agree_and_read_the_same_plan(tmp_path):
    env, dirs = job_env(), [str(tmp_path / "cache")]
    begin, done, results = CTX.Event(), CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=workers.local_rank, args=(dirs, env, begin, done, results))
             for _ in range(4)]
    for proc in procs:
        proc.start()
    begin.set()
    rows = [results.get(timeout=60) for _ in procs]
    done.set()
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    assert len({token for _, token, _, _, _ in rows}) == 1
    assert sum(led for _, _, led, _, _ in rows) == 1
    expected = hashlib.sha256(workers.plan_for(0).tobytes()).hexdigest()
    assert {digest for _, _, _, digest, _ in rows} == {expected}
    assert not any(writeable for *_, writeable in rows)


@pytest.mark.slow
def test_follower_notices_a_sigkilled_leader_within_seconds(tmp_path):
    env, dirs = job_env(), [str(tmp_path)]
    leader = start(workers.lead_forever, dirs, env)
    follower = NodeCoordinator.join(Namespace.for_job(dirs, env=env), timeout=10)
    assert not follower.is_leader
    try:
        os.kill(leader.pid, 9)  # not reaped yet: the follower must see through the zombie
        began = time.monotonic()
        with pytest.raises(CoordinationError, match=f"leader \\(pid {leader.pid}\\).*died"):
            follower.read(0, timeout=60)
        assert time.monotonic() - began < 2.0
    finally:
        kill(leader)
        follower.close()


@pytest.mark.slow
def test_failure_in_another_process_stops_the_wait_with_its_reason(tmp_path):
    ns_dirs, env = [str(tmp_path)], job_env()
    with NodeCoordinator.join(Namespace.for_job(ns_dirs, env=env), timeout=5) as leader:
        child = CTX.Process(target=workers.fail_node, args=(ns_dirs, env, "disk full on /data"))
        child.start()
        with pytest.raises(OSError, match="OSError: disk full on /data"):  # the cause's type
            leader.read(0, timeout=30)
        child.join(timeout=10)
        with pytest.raises(OSError, match="disk full"):
            leader.publish(0, np.zeros(2))


@pytest.mark.slow
def test_pickled_coordinator_follows_in_a_worker(tmp_path):
    with NodeCoordinator.join(Namespace.for_job([tmp_path]), timeout=5) as leader:
        leader.publish(0, workers.plan_for(0))
        results = CTX.Queue()
        child = CTX.Process(target=workers.follow_and_read, args=(leader, results))
        child.start()
        led, digest = results.get(timeout=30)
        child.join(timeout=10)
    assert not led
    assert digest == hashlib.sha256(workers.plan_for(0).tobytes()).hexdigest()


@pytest.mark.slow
def test_forked_child_of_the_leader_is_not_a_leader(tmp_path):
    fork = multiprocessing.get_context("fork")
    with NodeCoordinator.join(Namespace.for_job([tmp_path]), timeout=5) as leader:
        leader.publish(0, np.arange(5))
        results = fork.Queue()
        child = fork.Process(target=workers.report_role, args=(leader, results))
        child.start()
        assert results.get(timeout=30) == (False, 10)
        child.join(timeout=10)
        assert leader.is_leader and leader.read(0).sum() == 10


def run_script(local: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "tests" / "coord" / "workers.py"), str(local), *extra],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_rerunning_a_script_works_even_after_a_crash(tmp_path):
    shm = tmp_path / "shm"  # private, so no concurrent test's clean-up can hide a leftover
    shm.mkdir()
    # The same job identity for every run, as when re-running a launcher command by hand.
    env = {**job_env(), "STREAMING_SHM_DIR": str(shm)}
    crashed = run_script(tmp_path, env, "--die")
    assert crashed.returncode == -9, crashed.stderr
    token = crashed.stdout.split()[0]
    leftovers = {p.name for p in shm.iterdir()}
    assert {f"sds_{token}_ctl", f"sds_{token}_v1"} <= leftovers
    for _ in range(2):
        run = run_script(tmp_path, env)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [token, "True", "True"]
        assert list(shm.iterdir()) == []
