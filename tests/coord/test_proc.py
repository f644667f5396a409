"""Process identity: dead, zombie and recycled pids all count as dead."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from streaming.coord.proc import ProcessId, _start_time


def test_current_process_is_alive():
    me = ProcessId.current()
    assert me.pid == os.getpid()
    assert me.alive()


def test_killed_child_is_dead_even_before_it_is_reaped():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ident = ProcessId(child.pid, _start_time(child.pid))
        assert ident.alive()
        child.kill()
        deadline = time.monotonic() + 5
        while ident.alive() and time.monotonic() < deadline:  # a zombie until reaped
            time.sleep(0.01)
        assert not ident.alive()
    finally:
        child.kill()
        child.wait()
    assert not ident.alive()


def test_recycled_pid_is_dead():
    me = ProcessId.current()
    if not me.start:
        pytest.skip("no /proc: start times are unknown on this OS")
    assert not ProcessId(me.pid, me.start + 1, me.pidns).alive()


def test_other_pid_namespace_is_never_declared_dead():
    me = ProcessId.current()
    if not me.pidns:
        pytest.skip("no /proc: pid namespaces are unknown on this OS")
    assert ProcessId(2**22 + 12345, 1, me.pidns + 1).alive()
    assert not ProcessId(0).alive()
