"""A process forked while another thread held one of our locks (a DataLoader worker started
while a prefetching thread worked) takes that lock at once, for every lock of ours a forked
child uses: the lock itself, the per-process SDK clients, the job namespaces' counter, the
at-exit closer, the verified-file records, the index fetch turns, the node claims, the
process's cache tables and its open shards."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from streaming.cache.folder import index_fetch_turn as index_once
from streaming.cache.folder import node_claim
from streaming.cache.folder import verified_files as verified
from streaming.cache.table import process_tables
from streaming.coord import names
from streaming.read.open_shards import OpenShards
from streaming.storage.per_process import PerProcess
from streaming.util import exit_close
from streaming.util.fork_safe_lock import ForkSafeLock

DEADLINE = 20.0

LOCKS: dict[str, Callable[[], ForkSafeLock]] = {
    "own": ForkSafeLock,
    "per_process": lambda: PerProcess()._lock,
    "names": lambda: names._instances_lock,
    "exit_close": lambda: exit_close._lock,
    "verified": lambda: verified._lock,
    "index_once": lambda: index_once._opened_lock,
    "node_claim": lambda: node_claim._held_lock,
    "process_tables": lambda: process_tables._tables_lock,
    "open_shards": lambda: OpenShards(SimpleNamespace(open_prepared=lambda shard: None))._lock,
}


def _take(lock: ForkSafeLock) -> None:
    with lock:
        pass


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_a_child_forked_while_a_thread_holds_the_lock_takes_it(name):
    lock = LOCKS[name]()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(DEADLINE)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(DEADLINE)
    try:
        child = multiprocessing.get_context("fork").Process(target=_take, args=(lock,))
        child.start()
        child.join(DEADLINE)
        stuck = child.is_alive()
        if stuck:
            child.kill()
            child.join()
        assert not stuck, f"the child waited for {name}'s lock, held by a thread it does not have"
        assert child.exitcode == 0
        assert lock.locked()  # still the parent's holder's
    finally:
        release.set()
        holder.join(DEADLINE)
    with lock:  # and free again here once released
        pass
