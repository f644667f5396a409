"""Where a DataLoader worker's threads are, asked for by its training process.

A worker settling in (`streaming.coord.worker_setup`) opens a small file named after its parent (the
training process, or a fork server the training process started) and itself,
`<parent pid>.<worker pid>.stacks` in this user's stacks folder, and has Python's `faulthandler`
write every thread's stack there on `STACKS_SIGNAL` (a real-time signal, so a user's handlers
of SIGUSR1/SIGUSR2 are left alone). The training process finds its workers by those names,
checks that each is alive and the child of the process its name says (itself, or a child of
its own), signals it and reads what it wrote (`worker_stacks`). Linux only: elsewhere there is
no spare signal, and `worker_stacks` returns nothing.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from streaming.coord.proc import ProcessId, parent_pid

STACKS_SIGNAL: int | None = signal.SIGRTMAX - 6 if hasattr(signal, "SIGRTMAX") else None
SUFFIX = ".stacks"
WRITE_WAIT_S = 0.5  # seconds a signalled worker gets to write its stacks

_armed: dict[int, IO[bytes]] = {}  # this process's open stacks file, by its pid


@dataclass(frozen=True)
class WorkerStacks:
    """One worker's threads as faulthandler printed them.

    Args:
        pid: the worker process.
        text: every thread's stack, most recent call first.
    """

    pid: int
    text: str


def stacks_folder() -> Path:
    """This user's folder of workers' stacks files (created 0700). OSError when the path is
    not a folder of this user's that only this user can open: a planted file there could
    name a process to signal."""
    folder = Path(tempfile.gettempdir()) / f"streaming-stacks-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError(f"{folder} is not a private folder of this user's: no stall stacks")
    return folder


def arm_worker() -> Path | None:
    """In a DataLoader worker, once per process: write every thread's stack into this worker's
    stacks file when `STACKS_SIGNAL` arrives; the file (None where there is no such signal, or
    the folder cannot be written). Removes the files of ended workers (`_sweep`).
    """
    if STACKS_SIGNAL is None or os.getpid() in _armed:
        return None
    try:
        folder = stacks_folder()
        _sweep(folder)
        path = folder / f"{os.getppid()}.{os.getpid()}{SUFFIX}"
        file = open(path, "wb")  # noqa: SIM115 (open for the process's life: faulthandler's)
    except OSError:
        return None
    _armed[os.getpid()] = file
    faulthandler.register(STACKS_SIGNAL, file=file, all_threads=True, chain=False)
    return path


def worker_stacks(wait_s: float = WRITE_WAIT_S) -> list[WorkerStacks]:
    """The stacks of this process's live DataLoader workers that armed themselves, each
    signalled once and given `wait_s` seconds to write.

    Args:
        wait_s: seconds to wait for the workers' writes.
    """
    if STACKS_SIGNAL is None:
        return []
    me = os.getpid()
    asked: list[tuple[int, Path, int]] = []
    workers = [*_workers_of(me)]
    for server in _children_of(me):  # a fork server's workers are its children, not ours
        workers += _workers_of(server)
    for pid, path in workers:
        try:
            before = path.stat().st_size
            os.kill(pid, STACKS_SIGNAL)
        except OSError:
            continue
        asked.append((pid, path, before))
    if asked:
        time.sleep(wait_s)
    found = []
    for pid, path, before in asked:
        with contextlib.suppress(OSError), path.open("rb") as f:
            f.seek(before)
            found.append(WorkerStacks(pid, f.read().decode(errors="replace").strip()))
    return found


def forget_gone_workers() -> None:
    """Remove the stacks files of this process's workers that have ended."""
    with contextlib.suppress(OSError):
        mine = {pid for pid, _ in _workers_of(os.getpid())}
        for path in stacks_folder().glob(f"{os.getpid()}.*{SUFFIX}"):
            if _pids(path.name)[1] not in mine:
                path.unlink(missing_ok=True)


def _workers_of(parent: int) -> Iterator[tuple[int, Path]]:
    """(pid, stacks file) of `parent`'s armed workers that are alive and its children."""
    with contextlib.suppress(OSError):
        for path in stacks_folder().glob(f"{parent}.*{SUFFIX}"):
            pid = _pids(path.name)[1]
            if pid > 0 and parent_pid(pid) == parent:
                yield pid, path


def _children_of(pid: int) -> list[int]:
    """`pid`'s child processes, from /proc (empty where it cannot be read)."""
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                children += [int(c) for c in (task / "children").read_text().split()]
    return children


def _sweep(folder: Path) -> None:
    """Remove the files of workers whose training process no longer runs, and of this
    worker's predecessors that have ended (a plain DataLoader's workers of earlier epochs)."""
    siblings_of = os.getppid()
    for path in folder.glob(f"*{SUFFIX}"):
        parent, pid = _pids(path.name)
        if parent > 0 and (not ProcessId(parent).alive() or (
                parent == siblings_of and not ProcessId(pid).alive())):
            path.unlink(missing_ok=True)


def _pids(name: str) -> tuple[int, int]:
    parent, _, rest = name.partition(".")
    pid = rest.removesuffix(SUFFIX)
    return (int(parent), int(pid)) if parent.isdigit() and pid.isdigit() else (0, 0)
