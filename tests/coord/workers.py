"""Code run in child processes by the coordination tests (spawn targets and a script)."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from streaming.coord import FileLock, Namespace, NodeCoordinator, PlanBoard, SharedArray


def plan_for(epoch: int) -> np.ndarray:
    """A deterministic stand-in for a node plan int64 [R, W, n]."""
    return (np.arange(2 * 3 * 50, dtype=np.int64).reshape(2, 3, 50) * 7919 + epoch) % 1000003


def hold_segment(name: str, directory: str, ready) -> None:
    """Create a segment, announce it, and live until killed."""
    seg = SharedArray.create(name, (4,), np.int64, directory=Path(directory))
    seg.array[:] = 42
    ready.set()
    time.sleep(600)


def hold_shared_segment(name: str, directory: str, create: bool, leave, ready) -> None:
    """Create (or attach) a held segment, announce it, and close it when told to leave."""
    where = Path(directory)
    if create:
        seg = SharedArray.create(name, (4,), np.int64, directory=where, fill=7, held=True)
    else:
        seg = SharedArray.attach(name, directory=where, held=True)
    ready.set()
    leave.wait(60)
    seg.close()


def hold_segment_and_fork(name: str, directory: str, pids, ready) -> None:
    """Create a segment, fork a child that inherits its handle, announce both, live until killed."""
    seg = SharedArray.create(name, (4,), np.int64, directory=Path(directory))
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    pids.put(child)
    ready.set()
    time.sleep(600)
    seg.close()


def hold_lock(path: str, ready) -> None:
    """Take a file lock, announce it, and live until killed."""
    lock = FileLock(path)
    lock.acquire(timeout=10)
    ready.set()
    time.sleep(600)


def lead_forever(dirs: list[str], env: dict[str, str], ready) -> None:
    """Join as the node leader, announce it, and live until killed (publishing nothing)."""
    coord = NodeCoordinator.join(Namespace.for_job(dirs, env=env), timeout=10)
    assert coord.is_leader
    ready.set()
    time.sleep(600)


def local_rank(dirs: list[str], env: dict[str, str], rank: int, start, done, results) -> None:
    """One local rank: derive the namespace, join, ask the plan board for its row of epoch 0's
    plan (the first to ask computes it), report whether it computed it."""
    ns = Namespace.for_job(dirs, env=env)
    start.wait(timeout=30)
    coord = NodeCoordinator.join(ns, timeout=30)
    board = PlanBoard(ns)
    computed = []
    row = board.slice("epoch 0", lambda: computed.append(1) or plan_for(0), rank // 3, rank % 3)
    digest = hashlib.sha256(row.tobytes()).hexdigest()
    results.put((rank, ns.token, coord.is_leader, digest, bool(computed)))
    done.wait(timeout=30)  # the publisher must outlive the others' attach
    board.close()
    coord.close()


def follow(coord: NodeCoordinator, results) -> None:
    """Receive a pickled coordinator (as a DataLoader worker would) and report its role."""
    results.put((coord.is_leader, coord.ns.token))


def report_role(coord: NodeCoordinator, results) -> None:
    """In a forked child: report whether the inherited handle still claims leadership."""
    results.put((coord.is_leader, coord.ns.token))


def fail_node(dirs: list[str], env: dict[str, str], reason: str) -> None:
    """Join the node as a follower and raise its failure flag from inside a failing block."""
    coord = NodeCoordinator.join(Namespace.for_job(dirs, env=env), lead=False, timeout=10)
    try:
        with coord.failing_on_error():
            raise OSError(reason)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """A training script in miniature: `workers.py LOCAL_DIR [--die]` (job env from os.environ).

    Prints the namespace token and whether this run led. With --die it SIGKILLs itself after
    publishing a plan, leaving its segments behind as a crashed job would.
    """
    ns = Namespace.for_job([argv[0]])
    coord = NodeCoordinator.join(ns, timeout=10)
    board = PlanBoard(ns)
    ok = np.array_equal(board.slice("epoch 0", lambda: plan_for(0), 1, 2), plan_for(0)[1, 2])
    print(ns.token, coord.is_leader, ok, flush=True)
    if "--die" in argv:
        os.kill(os.getpid(), signal.SIGKILL)
    board.close()
    coord.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
