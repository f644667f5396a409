"""Engine behaviour that needs no network: pins, local-only data, recovery from a dead preparer,
adopting and trimming an existing cache, keep_zip accounting, stats, pickling, failure flag,
room under a limit (the horizons readers publish: test_engine_horizon.py)."""

from __future__ import annotations

import multiprocessing
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.table import node_table as tb
from streaming.cache.table.process_tables import drop_table
from streaming.coord.flag import FailureFlag
from streaming.errors import CoordinationError
from tests.cache.helpers import die_while_preparing, engine_source, open_dataset, read_in_order

SAMPLES = 600


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory, SAMPLES)


def _open(source: Path, cache: Path, **kw):
    return open_dataset(str(source), str(cache), **kw)


def _cost(handle, shards) -> int:
    return int(sum(handle.facts.raw_bytes[s] + handle.facts.zip_bytes[s] + 4096 for s in shards))


def test_a_pinned_shard_survives_a_reader_that_needs_the_room(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    n = len(handle.facts.raw_bytes)
    limit = _cost(handle, range(3)) + 4096
    holder = CacheEngine(handle.preparer, cache_limit=limit)
    path = holder.acquire(0)
    other = CacheEngine(handle.preparer, cache_limit=limit)
    ids = np.arange(handle.locator.shard_starts[1], SAMPLES)
    assert read_in_order(handle, other, ids) == len(ids)
    assert path.exists() and holder.table.state[0] == tb.PRESENT
    assert other.stats(node=False).evictions >= n - 4
    holder.release(0)
    other.acquire(n - 1)
    other.release(n - 1)
    holder.close()
    other.close()


def test_local_only_data_is_never_evicted_or_counted(source, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(source, data)
    handle = open_dataset(None, str(data))  # remote=None: read in place
    before = {p.name for p in data.iterdir()}
    engine = CacheEngine(handle.preparer, cache_limit=1)
    assert read_in_order(handle, engine, np.arange(SAMPLES)) == SAMPLES
    after = {p.name for p in data.iterdir()}
    assert before <= after  # decompressed next to the originals, nothing removed
    assert after - before == set(handle.facts.basenames)
    assert engine.stats().downloads == 0 and engine.stats().evictions == 0
    assert engine.check_plan(np.arange(SAMPLES)[None, None], handle.locator.shard_starts) \
        .bytes == 0
    engine.close()


def test_a_dead_preparers_shard_is_recovered(source, tmp_path):
    cache = tmp_path / "c"
    handle = _open(source, cache)
    engine = CacheEngine(handle.preparer, cache_limit="1gb")
    engine.attach()  # this process creates (and keeps) the node table
    child = multiprocessing.get_context("spawn").Process(
        target=die_while_preparing, args=(str(source), str(cache), 2))
    child.start()
    child.join(60)
    assert engine.table.state[2] == tb.PREPARING
    assert list(cache.glob(".*.dead.tmp"))
    path = engine.acquire(2)
    assert path.stat().st_size == handle.facts.raw_bytes[2]
    assert not list(cache.glob(".*.dead.tmp"))
    assert engine.table.reserved.sum() == 0
    engine.release(2)
    engine.close()


def test_a_table_left_by_processes_that_all_died_is_built_again_from_disk(source, tmp_path):
    """The only process of the node dies mid-preparation without any clean-up: its table is
    held by nobody, so the next process removes it and builds the node's table from what is on
    disk instead of trusting what the dead one left in it."""
    cache = tmp_path / "c"
    child = multiprocessing.get_context("spawn").Process(
        target=die_while_preparing, args=(str(source), str(cache), 2))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and list(cache.glob(".*.dead.tmp"))
    handle = _open(source, cache)
    engine = CacheEngine(handle.preparer, cache_limit="1gb")
    assert engine.table.created
    assert engine.table.state[2] == tb.ABSENT and engine.table.reserved.sum() == 0
    path = engine.acquire(2)
    assert path.stat().st_size == handle.facts.raw_bytes[2]
    assert not list(cache.glob(".*.dead.tmp"))
    engine.release(2)
    assert engine.stats(node=True).downloads == 1
    engine.close()


def test_existing_files_are_adopted_and_an_oversized_cache_is_trimmed(source, tmp_path):
    cache = tmp_path / "c"
    first = _open(source, cache)
    warm = CacheEngine(first.preparer)
    for shard in range(4):
        warm.prepare(shard)
    raw = first.facts.raw_bytes
    # Drop this process's mapping, so the next engine creates the table anew and scans the disk
    # (what a new training run on a warm cache folder does).
    warm.close()
    drop_table(warm.token)
    second = _open(source, cache)
    limit = int(raw[:2].sum() + 2 * 4096) + 4096 + (cache / "index.json").stat().st_size
    engine = CacheEngine(second.preparer, cache_limit=limit)
    assert engine.table.created
    assert (engine.table.state[:4] == tb.PRESENT).all()
    shards, _ = second.locator.locate(np.arange(SAMPLES))
    engine.follow(shards)  # trims to the limit, farthest next use first
    engine.stop()
    assert engine.table.used() <= limit
    assert engine.table.state[0] == tb.PRESENT and engine.table.state[3] == tb.ABSENT
    stats = engine.stats()
    assert stats.downloads == 0
    # Shards the reader reads later went, but for the last run's cache, not for this run's room.
    assert stats.needed_evictions == 0 < stats.evictions
    engine.close()


def test_keep_zip_keeps_and_counts_the_compressed_file(source, tmp_path):
    cache = tmp_path / "c"
    handle = _open(source, cache, keep_zip=True)
    engine = CacheEngine(handle.preparer, cache_limit="1gb")
    engine.prepare(1)
    zipped = cache / handle.facts.zip_basenames[1]
    assert zipped.exists()
    assert engine.table.disk[1] == handle.facts.raw_bytes[1] + handle.facts.zip_bytes[1]
    engine.close()


def test_hits_misses_and_bytes(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer)
    engine.acquire(0)
    engine.release(0)
    engine.acquire(0)
    engine.release(0)
    stats = engine.stats(node=False)
    assert (stats.hits, stats.misses, stats.downloads) == (1, 1, 1)
    assert stats.bytes_downloaded == handle.facts.zip_bytes[0]
    assert stats.wait_seconds > 0 and 0 < stats.hit_rate < 1
    assert "1 hits" in str(stats)
    engine.close()


def test_engine_pickles_for_dataloader_workers(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, cache_limit="10mb")
    engine.prepare(0)
    clone = pickle.loads(pickle.dumps(engine))
    assert clone.acquire(0).exists()
    clone.release(0)
    assert clone.stats().hits == 1  # node-wide: it sees the same table
    clone.close()
    engine.close()


def _forked_reader(engine: CacheEngine, out, together) -> None:
    path = engine.acquire(1)  # pinned in the child's own slot
    out.put((engine.slot.index, 1 in engine.table.pins[engine.slot.index].tolist(), path.exists()))
    together.wait(30)  # both children hold their slots at once (a freed slot is reused)
    engine.release(1)
    engine.close()


def test_a_forked_worker_reads_through_its_own_slot(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, cache_limit="10mb").attach()
    engine.acquire(0)  # the parent holds a pin while children come and go
    fork = multiprocessing.get_context("fork")
    out, together = fork.Queue(), fork.Barrier(2)
    children = [fork.Process(target=_forked_reader, args=(engine, out, together))
                for _ in range(2)]
    for child in children:
        child.start()
    seen = [out.get(timeout=30) for _ in children]
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    slots = {slot for slot, _, _ in seen}
    assert engine.slot.index not in slots and len(slots) == 2  # not the parent's slot, not shared
    assert all(pinned and exists for _, pinned, exists in seen)
    # A child closing its engine gave back its own slot, not the parent's.
    assert engine.table.slot_alive(engine.slot.index) and (engine.table.pins == 0).sum() == 1
    engine.release(0)
    engine.close()


def _fork_and_close(engine: CacheEngine) -> None:
    engine.close()


def test_a_forked_child_that_never_read_leaves_the_parents_slot_alone(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, cache_limit="10mb").attach()
    child = multiprocessing.get_context("fork").Process(target=_fork_and_close, args=(engine,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and engine.table.slot_alive(engine.slot.index)
    assert engine.acquire(0).exists()
    engine.release(0)
    engine.close()


def test_a_raised_failure_flag_stops_a_waiting_reader(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    flag = FailureFlag(np.zeros(256, np.uint8))
    engine = CacheEngine(handle.preparer, flag=flag)
    with engine.table.locked():
        engine.table.state[5] = tb.PREPARING  # someone (alive: us) is at it
        engine.table.owner[5] = engine.slot.index + 1
    flag.set("rank 3 died")
    with pytest.raises(CoordinationError, match="rank 3 died"):
        engine.acquire(5)
    assert engine.table.pins[engine.slot.index].max() == -1  # the failed acquire left no pin
    engine.close()


@pytest.mark.parametrize("shuffle", [False, True])
def test_four_readers_finish_at_exactly_the_minimum_limit(source, tmp_path, shuffle):
    from streaming.cache.policy.minimum_limit import minimum_limit
    from streaming.plan import PlanConfig, World, plan_node
    from tests.cache.helpers import run_rank
    from tests.support.folder_size import cache_bytes

    cache = tmp_path / "c"
    handle = _open(source, cache)
    samples = handle.locator.samples_per_shard
    cfg = PlanConfig(samples_per_shard=samples, shards_per_stream=np.array([len(samples)]),
                     shuffle=shuffle, shuffle_algo="py1s", shuffle_seed=1, batch_size=4,
                     num_canonical_nodes=1)
    ids = plan_node(cfg, World(1, 1, 4, 0, 0, 0, 1), epoch=0).ids
    owner = CacheEngine(handle.preparer, cache_limit="1tb").attach()
    limit = minimum_limit(ids, owner.footprint, handle.locator.shard_starts).bytes \
        + owner.table.other_bytes
    read, _ = run_rank({}, str(source), str(cache), ids[0], limit, 0.0)
    assert read == int((ids >= 0).sum())
    assert cache_bytes(cache) <= limit
    owner.close()


def test_acquiring_without_waiting_pins_only_a_present_shard(source, tmp_path):
    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, cache_limit="1gb")
    try:
        assert not engine.present(np.array([0, 1]))
        assert engine.acquire(1, wait=False) is None
        assert (engine.table.pins[engine.slot.index] < 0).all()  # nothing left pinned
        engine.prepare(1)
        assert engine.present(np.array([1])) and not engine.present(np.array([0, 1]))
        path = engine.acquire(1, wait=False)
        assert path is not None and path.exists()
        assert 1 in engine.table.pins[engine.slot.index].tolist()
        engine.release(1)
        assert (engine.table.pins[engine.slot.index] < 0).all()
    finally:
        engine.close()


def test_the_start_up_scan_reads_each_folder_once_and_drops_only_orphaned_leftovers(
        source, tmp_path, monkeypatch):
    """The first engine on a node adopts complete shards, removes orphaned zips and the temp and
    lock files of every shard no live process is preparing, however fresh (a kill -9 restart
    leaves none behind), and keeps those of a shard whose preparation lock is held; one
    directory listing serves every shard (a listing per shard grew with shards x files: 38 s
    for 5,000)."""
    import os

    from streaming.coord.lock import FileLock

    cache = tmp_path / "c"
    first = _open(source, cache)
    warm = CacheEngine(first.preparer)
    warm.prepare(0)
    warm.close()
    drop_table(warm.token)
    facts = first.facts
    raw1, zip2, raw3 = facts.basenames[1], facts.zip_basenames[2], facts.basenames[3]
    orphans = [cache / f".{raw1}.x1.tmp", cache / f".{zip2}.prep.lock",
               cache / f".{zip2}.lock", cache / f".{raw1}.{os.getpid()}.ab12.tmp"]
    live = cache / f".{raw3}.x2.tmp"
    foreign = cache / ".notes.tmp"  # no shard's: left alone
    for path in [*orphans, live, foreign]:
        path.write_bytes(b"partial")
    (cache / zip2).write_bytes(b"orphan")  # a zip without its raw file, as a crash leaves it
    listed = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p=".": listed.append(str(p)) or real(p))
    preparing = FileLock(cache / f".{raw3}.prep.lock")
    assert preparing.try_acquire()  # a live preparer of shard 3 (this process)
    try:
        engine = CacheEngine(_open(source, cache).preparer, cache_limit="1gb").attach()
    finally:
        preparing.release()
    try:
        assert engine.table.created
        assert engine.table.state[0] == tb.PRESENT and engine.table.state[1] == tb.ABSENT
        assert not any(path.exists() for path in orphans) and not (cache / zip2).exists()
        assert live.exists() and foreign.exists()
        # the index sync's listing, the shards', the folder total: not one per shard
        assert listed.count(str(cache)) <= 3, listed
    finally:
        engine.close()


def test_a_leftover_names_its_shard_file_even_with_dots_in_the_name():
    from streaming.cache.folder.disk_files import leftover_of

    owners = {"shard.00001.mds", "shard.00001.mds.zstd", "a.b"}
    assert leftover_of(".shard.00001.mds.zstd.k3j.tmp", owners) == "shard.00001.mds.zstd"
    assert leftover_of(".shard.00001.mds.prep.lock", owners) == "shard.00001.mds"
    assert leftover_of(".a.b.lock", owners) == "a.b"
    assert leftover_of("shard.00001.mds.x.tmp", owners) is None  # not hidden
    assert leftover_of(".shard.00002.mds.x.tmp", owners) is None  # another shard's
    assert leftover_of(".shard.00001.mds", owners) is None  # neither temp nor lock


def test_prefetches_in_flight_hold_at_most_half_the_limit(source, tmp_path):
    from streaming.cache.engine.cache_space import PREFETCH_SHARE, BringOutcome

    handle = _open(source, tmp_path / "c")
    cost = _cost(handle, [0])
    engine = CacheEngine(handle.preparer, cache_limit=6 * cost, prefetch_threads=1)
    space, table = engine.space, engine.table
    with table.locked():  # shard 0 being prepared by someone, holding 2.5 shards' worth
        table.state[0], table.reserved[0] = tb.PREPARING, 5 * cost // 2
    assert 5 * cost // 2 + _cost(handle, [1]) > PREFETCH_SHARE * 6 * cost
    assert space.bring(1, 10) == BringOutcome.AT_LIMIT  # a prefetch waits for room in flight
    assert table.state[1] == tb.ABSENT
    assert space.bring(1, -1) == BringOutcome.PRESENT  # a reader that needs it now does not
    with table.locked():
        table.state[0], table.reserved[0] = tb.ABSENT, 0
    assert space.bring(2, 10) == BringOutcome.PRESENT  # nothing in flight: one always starts
    engine.close()


def test_a_prefetch_waits_while_nearer_shards_need_the_room(source, tmp_path):
    from streaming.cache.engine.cache_space import BringOutcome

    handle = _open(source, tmp_path / "c")
    limit = _cost(handle, range(3))
    engine = CacheEngine(handle.preparer, cache_limit=limit, prefetch_threads=1)
    space, table = engine.space, engine.table
    # the reader reads shard 0 now, then 1, 2 and (at step 30) 3
    shards, starts = np.array([0, 1, 2, 3]), np.array([0, 10, 20, 30])
    engine.slot.publish(shards, starts, starts + 10, 0)
    assert space.bring(3, 30) == BringOutcome.AT_LIMIT  # 0, 1 and 2 fill the limit first
    assert table.state[3] == tb.ABSENT
    assert space.bring(1, 10) == BringOutcome.PRESENT  # 0 and 1 fit: no reason to wait
    assert space.bring(3, -1) == BringOutcome.PRESENT  # a reader that needs it now does not
    engine.close()


def _three_fit(handle) -> int:
    """A limit under which any three of the first six shards fit (one being prepared) and no
    four do."""
    probe = CacheEngine(handle.preparer)
    fp, other = probe.space.footprint, probe.table.other_bytes
    probe.close()
    limit = 3 * int(fp.resident[:6].max()) + int(fp.transient[:6].max()) + other
    assert 4 * int(fp.resident[:6].min()) + other > limit
    return limit


def test_a_prefetch_for_a_use_its_reader_has_passed_brings_nothing(source, tmp_path):
    from streaming.cache.engine.cache_space import BringOutcome

    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, cache_limit=_three_fit(handle), prefetch_threads=1)
    space, table = engine.space, engine.table
    # the reader has finished shard 0 (another reader evicted it), reads 1 now, then 2 and 3
    shards, starts = np.array([1, 2, 3]), np.array([10, 20, 30])
    engine.slot.publish(shards, starts, starts + 10, 10)
    for shard in (1, 2, 3):
        assert space.bring(shard, -1) == BringOutcome.PRESENT
    assert space.bring(0, 0, passed=lambda: True) == BringOutcome.PASSED
    assert table.state[0] == tb.ABSENT and engine.stats().evictions == 0
    # while the use is still ahead, a prefetch of a run that has begun makes room as a reader
    assert space.bring(0, 0, passed=lambda: False) == BringOutcome.PRESENT
    assert engine.stats().needed_evictions == 1
    engine.close()


def test_a_prefetcher_whose_reader_moved_on_does_not_bring_the_finished_run_back(
        source, tmp_path, monkeypatch):
    """A prefetcher takes its reader's step, then waits (for the GIL, for the lock); by the time
    it brings the absent shard of the run that step was in, the reader may have finished that
    run, and another reader may have evicted the shard as needed by nobody. Bringing it back
    would evict a shard the reader still needs (a run that has begun claims room as a reader
    does), and download both again."""
    from streaming.cache.engine.cache_space import BringOutcome

    monkeypatch.setattr(CacheEngine, "_prefetch", lambda self: None)  # steps taken by hand
    handle = _open(source, tmp_path / "c")
    engine = CacheEngine(handle.preparer, cache_limit=_three_fit(handle), prefetch_threads=1)
    engine.follow(np.repeat(np.arange(4), 10))  # shard k over steps [10k, 10k + 10)
    space, table = engine.space, engine.table
    for shard in (1, 2, 3):  # shard 0 is absent: evicted by another reader, say
        assert space.bring(shard, -1) == BringOutcome.PRESENT
    real = space.bring

    def late(*args, **kwargs) -> BringOutcome:
        engine.advance(10)  # the reader finished shard 0 while the prefetcher waited
        return real(*args, **kwargs)

    monkeypatch.setattr(space, "bring", late)
    assert engine._prefetch_step()  # it did something: look again from the reader's step
    assert table.state[0] == tb.ABSENT
    assert engine.stats().evictions == 0
    assert all(table.state[s] == tb.PRESENT for s in (1, 2, 3))
    engine.stop()
    engine.close()
