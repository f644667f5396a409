"""A reader that attaches to the node's cache table just as the last reader closes it (and with
it removes the table) still joins the table every later reader sees: real processes, the race
window held open on purpose."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from streaming.cache.engine.cache_engine import CacheEngine
from tests.cache.helpers import engine_source, open_dataset, read_in_order

SAMPLES = 200
DEADLINE = 60


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory, SAMPLES)


def _late_reader(source: str, cache: str, attached, closed, done, finished) -> None:
    """Attach to the table, wait while the last other reader closes it, then claim a slot and
    read: the race window a slow process would see, made wide."""
    from streaming.cache.table.node_table import CacheTable

    original = CacheTable.open.__func__
    held = []

    def attach_then_wait(cls, *args, **kwargs):
        table = original(cls, *args, **kwargs)
        if not held:  # only the first mapping waits
            held.append(table)
            attached.set()
            if not closed.wait(DEADLINE):
                raise TimeoutError("the other reader never closed")
        return table

    CacheTable.open = classmethod(attach_then_wait)
    handle = open_dataset(source, cache)
    engine = CacheEngine(handle.preparer, cache_limit=None)
    read_in_order(handle, engine, np.arange(SAMPLES))
    done.set()
    finished.wait(DEADLINE)
    engine.close()


def test_a_reader_attaching_while_the_last_one_closes_joins_the_live_table(source, tmp_path):
    cache = tmp_path / "cache"
    first = CacheEngine(open_dataset(str(source), str(cache)).preparer, cache_limit=None)
    first.attach()  # this process creates the table, and removes it when its last reader goes
    ctx = multiprocessing.get_context("spawn")
    attached, closed, done, finished = (ctx.Event() for _ in range(4))
    late = ctx.Process(target=_late_reader,
                       args=(str(source), str(cache), attached, closed, done, finished))
    late.start()
    try:
        assert attached.wait(DEADLINE), "the late reader never attached"
        first.close()  # the last reader of the table: it goes
        closed.set()
        assert done.wait(DEADLINE), "the late reader never finished reading"
        third = CacheEngine(open_dataset(str(source), str(cache)).preparer, cache_limit=None)
        third.attach()
        alive = third.table.live_slots()
        # The late reader's slot is in the table this later reader joined: one table per node.
        assert int(alive.sum()) == 2
        # ... and what it downloaded counts in the node's figures.
        shards = len(open_dataset(str(source), str(cache)).facts.raw_bytes)
        assert third.stats().downloads == shards
        third.close()
    finally:
        finished.set()
        late.join(DEADLINE)
        if late.is_alive():
            late.kill()
    assert late.exitcode == 0


def test_a_table_that_keeps_being_removed_is_a_coordination_error(monkeypatch, tmp_path):
    from streaming.cache.table import node_table as tb
    from streaming.cache.table.reader_slot import JOIN_TRIES, ReaderSlot
    from streaming.errors import CoordinationError

    mapped = []
    original = tb.CacheTable.open.__func__

    def open_counted(cls, *args, **kwargs):
        mapped.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(tb.CacheTable, "open", classmethod(open_counted))
    monkeypatch.setattr(tb.CacheTable, "removed", lambda self: True)
    token = f"t{tmp_path.name[-8:]}"
    with pytest.raises(CoordinationError, match=f"{token!r} was removed {JOIN_TRIES} times"):
        ReaderSlot.join(token, 4, lambda table: None, limit=0, downloads=0,
                        on_dead_owner=lambda table, shard: None)
    assert len(mapped) == JOIN_TRIES  # each try forgot the removed mapping and mapped again


def _first_reader(source: str, cache: str, attached, leave) -> None:
    """Create the node's table, read nothing, and exit once told (closing its dataset first,
    as a finished evaluation job would)."""
    engine = CacheEngine(open_dataset(source, cache).preparer, cache_limit=None)
    engine.attach()
    attached.set()
    leave.wait(DEADLINE)
    engine.close()


def _later_reader(source: str, cache: str, joined) -> None:
    """Join the node's table after its creator exited, read every sample, and report the live
    readers it sees and the node's downloads."""
    handle = open_dataset(source, cache)
    engine = CacheEngine(handle.preparer, cache_limit=None)
    engine.attach()
    read_in_order(handle, engine, np.arange(SAMPLES))
    joined.put((int(engine.table.live_slots().sum()), engine.stats().downloads))
    engine.close()


def test_a_table_outlives_its_creator_while_another_process_reads_it(source, tmp_path):
    cache = tmp_path / "cache"
    ctx = multiprocessing.get_context("spawn")
    attached, leave = ctx.Event(), ctx.Event()
    creator = ctx.Process(target=_first_reader, args=(str(source), str(cache), attached, leave))
    creator.start()
    assert attached.wait(DEADLINE), "the first reader never created the table"
    handle = open_dataset(str(source), str(cache))
    staying = CacheEngine(handle.preparer, cache_limit=None)
    staying.attach()  # joins the creator's table
    read_in_order(handle, staying, np.arange(SAMPLES // 2))
    leave.set()
    creator.join(DEADLINE)
    assert creator.exitcode == 0
    assert not staying.table.removed()  # the creator's exit left the table to its readers
    joined = ctx.Queue()
    later = ctx.Process(target=_later_reader, args=(str(source), str(cache), joined))
    later.start()
    try:
        live, downloads = joined.get(timeout=DEADLINE)
    finally:
        later.join(DEADLINE)
        if later.is_alive():
            later.kill()
    shards = len(handle.facts.raw_bytes)
    # One table per node: the later process sees the staying reader, and every shard was
    # downloaded once by one of the two, as the node's figures say.
    assert live == 2
    assert downloads == staying.stats().downloads == shards
    staying.close()
