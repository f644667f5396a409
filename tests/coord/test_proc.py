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


def test_a_forked_child_is_itself_not_the_parent_it_was_copied_from():
    """The identity is read once per process: a forked child, which inherits the parent's
    memory, must still report its own pid and start time."""
    parent = ProcessId.current()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        me = ProcessId.current()
        fresh = _start_time(os.getpid())  # read from /proc now, for comparison
        os.write(write, f"{me.pid} {me.start} {fresh}".encode())
        os._exit(0)
    os.close(write)
    pid, start, fresh = (int(v) for v in os.read(read, 200).split())
    os.waitpid(child, 0)
    os.close(read)
    assert pid == child and start == fresh and fresh != 0
    assert ProcessId.current() == parent


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


def test_parent_pid_names_the_parent_and_nothing_for_a_gone_process():
    import os

    from streaming.coord.proc import parent_pid

    assert parent_pid(os.getpid()) == os.getppid()
    assert parent_pid(999_999_999) == 0
