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


def test_leader_and_follower(tmp_path):
    ns = Namespace.for_job([tmp_path])
    with NodeCoordinator.join(ns, timeout=5) as leader, \
            NodeCoordinator.join(ns, timeout=5) as follower:
        assert leader.is_leader and not follower.is_leader
        assert follower.leader == leader.leader
        with pytest.raises(DeadlineExceeded, match="a plan"):
            follower.wait(lambda: None, what="a plan", timeout=0.1)


def test_two_coordinators_on_the_same_dirs_in_one_process(tmp_path):
    env = job_env()
    a = NodeCoordinator.join(Namespace.for_job([tmp_path], env=env), timeout=5)
    b = NodeCoordinator.join(Namespace.for_job([tmp_path], env=env), timeout=5)
    try:
        assert a.ns != b.ns and a.is_leader and b.is_leader
        a.fail("only a's")
        assert a.reason() == "only a's" and b.reason() is None
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
    procs = [CTX.Process(target=workers.local_rank, args=(dirs, env, k, begin, done, results))
             for k in range(4)]
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
    assert sum(computed for *_, computed in rows) == 1  # the plan is computed once per node
    plan = workers.plan_for(0)
    for rank, _, _, digest, _ in rows:
        assert digest == hashlib.sha256(plan[rank // 3, rank % 3].tobytes()).hexdigest()


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
            follower.wait(lambda: None, what="a plan", timeout=60)
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
            leader.wait(lambda: None, what="a plan", timeout=30)
        child.join(timeout=10)
        with pytest.raises(OSError, match="disk full"):
            leader.check()


@pytest.mark.slow
def test_pickled_coordinator_follows_in_a_worker(tmp_path):
    with NodeCoordinator.join(Namespace.for_job([tmp_path]), timeout=5) as leader:
        results = CTX.Queue()
        child = CTX.Process(target=workers.follow, args=(leader, results))
        child.start()
        led, token = results.get(timeout=30)
        child.join(timeout=10)
    assert not led and token == leader.ns.token


@pytest.mark.slow
def test_forked_child_of_the_leader_is_not_a_leader(tmp_path):
    fork = multiprocessing.get_context("fork")
    with NodeCoordinator.join(Namespace.for_job([tmp_path]), timeout=5) as leader:
        results = fork.Queue()
        child = fork.Process(target=workers.report_role, args=(leader, results))
        child.start()
        assert results.get(timeout=30) == (False, leader.ns.token)
        child.join(timeout=10)
        assert leader.is_leader


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
    assert f"sds_{token}_ctl" in leftovers
    assert any(name.startswith(f"sds_{token}_p") for name in leftovers)  # the published plan
    for _ in range(2):
        run = run_script(tmp_path, env)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [token, "True", "True"]
        assert list(shm.iterdir()) == []
