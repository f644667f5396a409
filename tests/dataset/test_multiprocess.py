"""Training-like runs: 2 simulated nodes x 2 ranks x 2 DataLoader workers as real processes."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from tests.support.datasets import write_ids
from tests.support.jobs import ForkedJob, epoch_ids, global_batches, run_job

pytestmark = pytest.mark.slow

N = 320  # a multiple of the global batch (4 ranks x 4), so an epoch has no padding


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mp")
    write_ids(root / "a", N, size_limit=600, compression="zstd")
    return f"file://{root / 'a'}"


@pytest.fixture(scope="module")
def two_streams(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("mp2")
    write_ids(root / "s0", 192, size_limit=600)
    write_ids(root / "s1", 64, start=10_000, size_limit=600)
    return [f"file://{root / 's0'}", f"file://{root / 's1'}"]


def test_epoch_exactly_once_equal_batches_and_determinism_with_a_second_job(
        source: str, tmp_path: Path) -> None:
    args = ["--shuffle", "--epochs", "2"]
    # Two jobs at the same time on one host over the same local cache directories.
    jobs = [ForkedJob(tmp_path / f"job{j}", [source], extra=args, local_root=tmp_path / "cache",
                tag=f"job{j}") for j in range(2)]
    first, second = (job.wait() for job in jobs)
    for results in (first, second):
        for r in results:
            assert r.returncode == 0, r.stderr[-3000:]
        for epoch in (0, 1):
            seen = epoch_ids(results, epoch)
            assert sorted(seen) == list(range(N)), "not exactly once"
            counts = {len(r.batches[epoch]) for r in results}
            assert counts == {N // 16}, counts
        assert {r.length for r in results} == {N // 4}
        assert epoch_ids(results, 0) != epoch_ids(results, 1), "epochs must reshuffle"
    assert [r.batches for r in first] == [r.batches for r in second], "not deterministic"


@pytest.mark.parametrize("method", ["stratified", "per_stream"])
def test_batching_methods_end_to_end(two_streams: list[str], tmp_path: Path,
                                     method: str) -> None:
    results = run_job(tmp_path, two_streams, extra=["--shuffle", "--batching", method])
    batches = global_batches(results)
    assert sorted(i for b in batches for i in b) == list(range(192)) + list(range(10_000, 10_064))
    for batch in batches:
        per = collections.Counter(i >= 10_000 for i in batch)
        if method == "stratified":
            assert per == {False: 12, True: 4}, per  # 3:1 shares of a global batch of 16
        else:
            assert len(per) == 1, batch


def test_resume_mid_epoch_same_and_smaller_topology(source: str, tmp_path: Path) -> None:
    stop = run_job(tmp_path / "a", [source], extra=["--shuffle", "--stop-after", "5"])
    consumed = [i for r in stop for b in r.batches[0] for i in b]
    state = stop[0].state
    assert state["sample_in_epoch"] == 5 * 16
    assert all(r.state == state for r in stop)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state))
    same = run_job(tmp_path / "b", [source], extra=["--shuffle", "--resume", str(state_file)])
    smaller = run_job(tmp_path / "c", [source], nodes=1,
                      extra=["--shuffle", "--resume", str(state_file), "--batch-size", "8"])
    for results in (same, smaller):
        rest = epoch_ids(results, 0)
        assert sorted(consumed + rest) == list(range(N)), "duplicate or gap after resume"
    # Elastic: the global batches after the resume point are the same sets on 1 node.
    assert [sorted(b) for b in global_batches(same)] == \
        [sorted(b) for b in global_batches(smaller)]


def test_killed_worker_fails_the_training_process_and_next_run_starts(
        source: str, tmp_path: Path) -> None:
    job = ForkedJob(tmp_path / "kill", [source], extra=["--kill-worker-after", "2"],
              local_root=tmp_path / "cache")
    results = job.wait(timeout=90)
    killed = results[0]
    assert killed.returncode == 3, killed.stderr[-2000:]
    assert "worker" in killed.error.lower(), killed.error
    assert killed.error_at - killed.killed_at < 30
    again = run_job(tmp_path / "again", [source], local_root=tmp_path / "cache")
    assert sorted(epoch_ids(again)) == list(range(N))
