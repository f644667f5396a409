"""Process plumbing shared by the coordination tests."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal

from streaming.coord import wait_for

CTX = mp.get_context("spawn")


def start(target, *args) -> mp.Process:
    """Start `target(*args, ready)` in a fresh interpreter and wait until it sets `ready`."""
    ready = CTX.Event()
    proc = CTX.Process(target=target, args=(*args, ready), daemon=True)
    proc.start()
    if not ready.wait(timeout=30):
        proc.kill()
        raise AssertionError(f"child {target.__name__} did not get ready (exit {proc.exitcode})")
    return proc


def kill(proc: mp.Process) -> None:
    """SIGKILL `proc` and reap it, as the OOM killer or a crashed node would."""
    os.kill(proc.pid, signal.SIGKILL)
    # Poll the exit code rather than join(): join also waits for a pipe that a grandchild
    # forked by `proc` may still hold open.
    wait_for(lambda: proc.exitcode, what=f"pid {proc.pid} to exit", timeout=10)
