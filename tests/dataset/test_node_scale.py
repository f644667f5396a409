"""A full node of processes: 8 ranks x 8 DataLoader workers (64 workers, 72 processes with the
ranks) on one simulated node, then two such nodes, on tiny data.

The ranks are forks of one interpreter that imported torch once (run_rank_forks.py) and find
their place from the launcher variables alone (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR/PORT; no process group); each node caches in its own folder and
so gets its own job namespace. Every job keeps its shared segments in a fresh folder under
/dev/shm ($STREAMING_SHM_DIR), so what a job leaves behind is that folder's content once its
processes have exited. What each rank must read comes from the pure plan, computed here.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.plan import World, plan_node
from tests.support.datasets import write_ids
from tests.support.jobs import ForkedJob, RankResult, epoch_ids, global_batches

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

N = 1536
RANKS = 8
WORKERS = 8
GLOBAL = 32  # the global batch: 8 ranks x 4 on one node, 16 ranks x 2 on two
BATCHES = N // GLOBAL
STOP = 10  # global batches of the second epoch the interrupted job consumes
JOB_TIMEOUT = 420.0  # 72-144 processes on a loaded 2-core machine


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("node")
    return write_ids(root / "a", N, size_limit=2000, compression="zstd")


@pytest.fixture(scope="module")
def shm(tmp_path_factory) -> Iterator[Path]:
    """A private shared-memory folder for the module's jobs, removed afterwards."""
    base = Path("/dev/shm") if os.path.isdir("/dev/shm") else tmp_path_factory.mktemp("shm")
    folder = base / f"nodesim-{secrets.token_hex(4)}"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _run(workdir: Path, source: Path, shm: Path, *, nodes: int,
         args: list[str]) -> list[RankResult]:
    tag = workdir.name
    job = ForkedJob(workdir, [f"file://{source}"], nodes=nodes, ranks_per_node=RANKS,
              local_root=workdir / "cache", tag=tag,
              extra=["--no-dist", "--workers", str(WORKERS), "--shuffle", *args],
              env={"STREAMING_SHM_DIR": str(shm)})
    results = job.wait(timeout=JOB_TIMEOUT)
    for r in results:
        assert r.returncode == 0, f"{tag} rank {r.rank} exited {r.returncode}:\n{r.stderr[-4000:]}"
    left = sorted(p.name for p in shm.iterdir())
    assert left == [], f"{tag} left shared memory behind: {left}"
    return results


def _expected(source: Path, tmp_path: Path, epoch: int) -> list[list[int]]:
    """The global batches of `epoch` on one node of 8 ranks with batch 4, from the plan."""
    world = World(1, RANKS, 1, 0, 0)
    ds = StreamingDataset(local=str(source), batch_size=4, shuffle=True, world=world)
    try:
        ids = plan_node(ds.config, world, epoch, 0).ids[:, 0, :]
    finally:
        ds.close()
    return [sorted(int(i) for i in ids[:, 4 * g:4 * g + 4].ravel()) for g in range(BATCHES)]


def _sorted_batches(results: list[RankResult], epoch: int) -> list[list[int]]:
    return [sorted(b) for b in global_batches(results, epoch)]


@pytest.fixture(scope="module")
def one_node(source: Path, shm: Path, tmp_path_factory) -> list[RankResult]:
    """One node: the first epoch whole, the second stopped after STOP global batches."""
    return _run(tmp_path_factory.mktemp("one"), source, shm, nodes=1,
                args=["--epochs", "2", "--batch-size", "4",
                      "--stop-after", str(BATCHES + STOP)])


def test_one_node_of_64_workers_reads_an_epoch_exactly_once_as_planned(
        one_node: list[RankResult], source: Path, tmp_path: Path) -> None:
    assert sorted(epoch_ids(one_node, 0)) == list(range(N)), "not exactly once"
    assert {len(r.batches[0]) for r in one_node} == {BATCHES}
    assert {r.length for r in one_node} == {N // RANKS}
    assert _sorted_batches(one_node, 0) == _expected(source, tmp_path, 0)


def test_two_nodes_resume_the_stopped_epoch_exactly_then_read_the_next_whole(
        one_node: list[RankResult], source: Path, shm: Path, tmp_path: Path) -> None:
    state = one_node[0].state
    assert (state["epoch"], state["sample_in_epoch"]) == (1, STOP * GLOBAL)
    assert all(r.state == state for r in one_node)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state))
    # Two nodes of 8 ranks with batch 2: the same global batch of 32 samples.
    two = _run(tmp_path / "two", source, shm, nodes=2,
               args=["--epochs", "2", "--batch-size", "2", "--resume", str(state_file)])
    consumed = epoch_ids(one_node, 1)
    assert sorted(consumed + epoch_ids(two, 0)) == list(range(N)), "gap or duplicate"
    assert _sorted_batches(one_node, 1) == _expected(source, tmp_path, 1)[:STOP]
    assert _sorted_batches(two, 0) == _expected(source, tmp_path, 1)[STOP:]
    assert sorted(epoch_ids(two, 1)) == list(range(N)), "not exactly once"
    assert _sorted_batches(two, 1) == _expected(source, tmp_path, 2)
