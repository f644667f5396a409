"""Two nodes of one job (or a job on another machine) using one `local` folder, as on a network
file system: the second is refused at start-up with CacheFolderError naming the folder and the
fix, instead of ranks dying later and the cache outgrowing its limit. Each node is a real
process in its own process group, with its own node rank; a node that has exited no longer
holds the folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.dataset.conftest import write_ids
from tests.dataset.harness import REPO

_NODE = """
import sys
from streaming import StreamingDataset
from streaming.errors import CacheFolderError
try:
    ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=1)
except CacheFolderError as exc:
    print("refused:", exc, flush=True)
    raise SystemExit(3)
print("ready", len(ds), flush=True)
sys.stdin.read()  # hold the folder until the test closes our stdin
ds.close()
"""


def _start(rank: int, remote: Path, local: Path, *, per_node: int = 1) -> subprocess.Popen:
    """Rank `rank` of a job of two ranks, `per_node` ranks a node."""
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank % per_node),
               LOCAL_WORLD_SIZE=str(per_node), MASTER_ADDR="127.0.0.1", MASTER_PORT="4242",
               PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", _NODE, str(remote), str(local)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)


def _first_line(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def _finish(proc: subprocess.Popen) -> int:
    proc.communicate(timeout=120)
    return proc.returncode


def test_a_second_node_of_the_job_is_refused_while_the_first_holds_the_folder(
        tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 40)
    local = tmp_path / "nfs" / "cache"
    first = _start(0, remote, local)
    try:
        assert _first_line(first).startswith("ready")
        second = _start(1, remote, local)
        line = _first_line(second)
        assert _finish(second) == 3, line
        assert line.startswith("refused:") and str(local) in line and "node 0" in line
    finally:
        assert _finish(first) == 0
    later = _start(1, remote, local)  # the first node is gone: the folder is free
    assert _first_line(later).startswith("ready")
    assert _finish(later) == 0


def test_ranks_of_one_node_share_the_folder(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 40)
    local = tmp_path / "cache"
    nodes = [_start(rank, remote, local, per_node=2) for rank in range(2)]
    try:
        assert [_first_line(p).split()[0] for p in nodes] == ["ready", "ready"]
    finally:
        assert [_finish(p) for p in nodes] == [0, 0]
