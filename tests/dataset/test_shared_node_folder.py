"""Two nodes of one job (or a job on another machine) using one `local` folder, as on a network
file system: the second is refused at start-up with CacheFolderError naming the folder and the
fix, instead of ranks dying later and the cache outgrowing its limit. Each node is a real
process in its own process group, with its own node rank; a node that has exited no longer
holds the folder."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

from streaming import StreamingDataset
from streaming.errors import CacheFolderError
from tests.support.datasets import write_ids

# Each node is a fork of this process (torch is imported once), in a session of its own.
_FORK = multiprocessing.get_context("fork")


def _node(env: dict[str, str], remote: Path, local: Path, conn: Connection) -> None:
    """Child side: become the rank `env` describes, open the dataset, report, and hold the
    folder until the test says go."""
    os.setsid()
    os.environ.update(env)
    try:
        ds = StreamingDataset(remote=str(remote), local=str(local), batch_size=1)
    except CacheFolderError as exc:
        conn.send(f"refused: {exc}")
        raise SystemExit(3) from None
    conn.send(f"ready {len(ds)}")
    conn.recv()
    ds.close()


class _Rank:
    """A running node process and the test's end of its pipe."""

    def __init__(self, rank: int, remote: Path, local: Path, per_node: int) -> None:
        env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank % per_node),
               "LOCAL_WORLD_SIZE": str(per_node), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": "4242"}
        self.conn, child = _FORK.Pipe()
        self.proc = _FORK.Process(target=_node, args=(env, remote, local, child))
        self.proc.start()
        child.close()


def _start(rank: int, remote: Path, local: Path, *, per_node: int = 1) -> _Rank:
    """Rank `rank` of a job of two ranks, `per_node` ranks a node."""
    return _Rank(rank, remote, local, per_node)


def _first_line(node: _Rank) -> str:
    assert node.conn.poll(120), "the node did not report within 120 s"
    return node.conn.recv()


def _finish(node: _Rank) -> int:
    if node.proc.is_alive():
        with contextlib.suppress(OSError):  # it may exit on its own meanwhile
            node.conn.send("go")
    node.proc.join(120)
    assert node.proc.exitcode is not None, "the node did not exit within 120 s"
    return node.proc.exitcode


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
