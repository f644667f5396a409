"""The per-reader cache engine: prefetch shards in plan order, keep the node's cache folders under
cache_limit with Belady eviction, and hand readers pinned shard paths.

One engine serves one reader (a DataLoader worker, or a thread in tests). All engines that use
the same cache folders on a node share one `CacheTable` in shared memory, so a shard is prepared
once per node, space is reserved before any byte is written, and a shard a reader holds is never
evicted. Actual copying, decompression and verification is the `ShardPreparer`'s job.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from streaming.cache import disk
from streaming.cache import table as tb
from streaming.cache.evict import choose_victims, next_use
from streaming.cache.limit import (
    Footprint,
    MinimumLimit,
    check_limit,
    minimum_limit,
)
from streaming.cache.lookahead import entry_runs, next_new, previous_runs, window_end
from streaming.cache.prepare import zipless_shards
from streaming.cache.stats import CacheStats
from streaming.coord.flag import FailureFlag
from streaming.coord.names import Namespace
from streaming.coord.wait import Deadline, Flag
from streaming.errors import (
    ArgumentError,
    CacheLimitError,
    CacheSpaceError,
    CoordinationError,
    DownloadTimeoutError,
)
from streaming.storage.retry import RetryPolicy
from streaming.util.units import parse_bytes

log = logging.getLogger(__name__)

PREPARE_THREADS = 4  # shards prepared at once (decompression and downloads release the GIL)
LOCK_SLACK = 4096  # bytes reserved per preparation for the small lock files it creates
REFRESH_STEPS = 8  # a reader rewrites its horizon at most this often (in samples)
READY, BUSY, WAIT = "ready", "busy", "wait"  # outcomes of CacheEngine._bring
_tables: dict[tuple[int, str], tb.CacheTable] = {}
_tables_lock = threading.Lock()


def _after_fork() -> None:
    global _tables_lock
    _tables_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork)


def _shared_table(token: str, num_shards: int, init) -> tb.CacheTable:
    """This process's mapping of the node table `token` (one per process, shared by threads)."""
    key = (os.getpid(), token)
    with _tables_lock:
        table = _tables.get(key)
        if table is None:
            table = _tables[key] = tb.CacheTable.open(token, num_shards, init=init)
        return table


def shard_footprint(table: Any, streams: Any) -> Footprint:
    """Cache bytes per shard of a ShardTable: nothing for local-only streams, the raw file (and
    a kept zip) while cached, the zip (unless it never lands on disk) and lock files while
    being prepared."""
    owner = np.asarray(table.stream_of_shard, np.int64)
    cached = np.array([stream.remote_dir is not None for stream in streams], bool)[owner]
    keep = np.array([bool(stream.keep_zip) for stream in streams], bool)[owner]
    return Footprint.of(table.raw_bytes, table.zip_bytes, keep, cached, LOCK_SLACK,
                        zipless=zipless_shards(table, streams))


class CacheEngine:
    """Node-coordinated shard cache for one reader over a `ShardPreparer`'s shards.

    `follow(shards)` gives the reader's future shard sequence (one entry per sample) and starts
    prefetching `predownload` samples ahead; `advance(i)` reports progress; `acquire(shard)`
    returns the ready raw file, pinned until `release(shard)`.
    """

    def __init__(self, preparer: Any, *, cache_limit: int | str | None = None,
                 predownload: int = 64, max_downloads: int | None = 8,
                 prefetch_threads: int = PREPARE_THREADS, wait_timeout: float | None = None,
                 flag: Flag | None = None) -> None:
        self.preparer = preparer
        self.footprint = shard_footprint(preparer.table, preparer.streams)
        self.cached = self.footprint.resident > 0  # raw shards are never empty
        self.limit = None if cache_limit is None else parse_bytes(cache_limit)
        self.predownload = max(int(predownload), 1)
        self.max_downloads = None if max_downloads is None else max(int(max_downloads), 1)
        self.prefetch_threads = max(int(prefetch_threads), 1)
        self.wait_timeout = wait_timeout if wait_timeout is not None else self._default_wait()
        self.flag = flag
        owner = np.asarray(preparer.table.stream_of_shard, np.int64)
        self.dirs = sorted({str(preparer.streams[s].local_dir)
                            for s in np.unique(owner[self.cached]).tolist()})
        self.token = self._token()
        self._reset_runtime()

    # ----- set-up ------------------------------------------------------------------------
    def _default_wait(self) -> float:
        budgets = []
        for stream in self.preparer.streams:
            retry = 2 if stream.download_retry is None else int(stream.download_retry)
            timeout = float(stream.download_timeout or 60)
            budgets.append(RetryPolicy(attempts=retry + 1, timeout=timeout).budget())
        return 2 * max(budgets) + 10.0

    def _token(self) -> str:
        """Same cache folders and shard set -> same table, across processes and jobs."""
        t = self.preparer.table
        digest = hashlib.blake2b(digest_size=8)
        for shard in np.flatnonzero(self.cached):
            digest.update(f"{t.basenames[shard]}:{int(t.raw_bytes[shard])}:"
                          f"{sorted(t.raw_hashes[shard].items())}\0".encode())
        return Namespace.derive(self.dirs, job=None, salt=f"{digest.hexdigest()}{tb.MAGIC:x}",
                                instance="cache").token

    def _reset_runtime(self) -> None:
        self._pid = os.getpid()
        self._table: tb.CacheTable | None = None
        self._slot = -1
        self._mutex = threading.Lock()
        self._errors: dict[int, BaseException] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._run_shard = np.zeros(0, np.int64)
        self._run_start = np.zeros(0, np.int64)
        self._run_end = np.zeros(0, np.int64)
        self._previous = np.zeros(0, np.int64)
        self._entries = np.zeros(0, np.int64)
        self._position = 0
        self._refresh_at = 0
        self._length = 0

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        if isinstance(state.get("flag"), FailureFlag):
            # A pickled copy would be a private snapshot: pass the NodeCoordinator as the flag
            # instead, which a new process unpickles as its own attachment to the node.
            state["flag"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._reset_runtime()

    @property
    def table(self) -> tb.CacheTable:
        """The node table, attached (and a reader slot claimed) on first use, and again in a
        forked child (a DataLoader worker): the parent's slot, pins and horizon are not its own."""
        if self._pid != os.getpid():
            self._reset_runtime()
        if self._table is None:
            table = _shared_table(self.token, len(self.cached), self._scan)
            with table.locked():
                self._slot = table.claim_slot(lambda shard: self._recover(shard, table))
                table.ask(self._slot, self.limit or 0, self.max_downloads or 0)
            self._table = table
        return self._table

    def attach(self) -> CacheEngine:
        """Join the node table now (the first process creates it and keeps it alive: call
        this in the training process before DataLoader workers start)."""
        _ = self.table
        self._warn_space()
        return self

    def effective_limit(self) -> int | None:
        """The node's limit: the smallest any process sharing these folders asked for."""
        return self.table.node_limit

    def _scan(self, table: tb.CacheTable) -> None:
        """First process on the node: adopt complete shards on disk, drop orphans, and count
        every other file in the folders against the limit."""
        t = self.preparer.table
        by_folder: dict[Path, list[int]] = {}
        for shard in np.flatnonzero(self.cached).tolist():  # part folders: `0/shard...` etc.
            by_folder.setdefault(self.preparer.raw_path(shard).parent, []).append(shard)
        for folder, shards in by_folder.items():
            files = disk.listing(folder)
            leaf = {s: (Path(t.basenames[s]).name,
                        Path(t.zip_basenames[s]).name if t.zip_basenames[s] else None)
                    for s in shards}
            for name in disk.sweep_orphans(folder, files, dict(leaf.values())):
                files.pop(name, None)
            for shard in shards:
                raw_name, zip_name = leaf[shard]
                raw = files.get(raw_name, (-1, 0.0))[0]
                if raw == int(t.raw_bytes[shard]):
                    table.state[shard] = tb.PRESENT
                    table.disk[shard] = raw + (files.get(zip_name, (0, 0.0))[0] if zip_name
                                               else 0)
                elif zip_name and zip_name in files:
                    disk.unlink(folder / zip_name)
        table.other_bytes = max(disk.folder_bytes(self.dirs) - int(table.disk.sum()), 0)

    # ----- the reader's plan -------------------------------------------------------------
    def follow(self, shards: np.ndarray) -> None:
        """Start prefetching for a reader that will read one sample of `shards[i]` per step i."""
        self.stop()
        self._errors.clear()  # a new pass tries again what failed in the last one
        seq = np.asarray(shards, np.int64).reshape(-1)
        if len(seq) and (int(seq.min()) < 0 or int(seq.max()) >= len(self.cached)):
            raise ArgumentError(f"follow() needs shard ids in [0, {len(self.cached)}) (drop the -1 "
                             "padding of a plan before mapping ids to shards)")
        starts = np.flatnonzero(np.diff(seq) != 0) + 1 if len(seq) else seq
        self._run_start = np.concatenate([[0], starts]).astype(np.int64) if len(seq) else seq
        self._run_shard = seq[self._run_start]
        self._length = len(seq)
        self._run_end = np.append(self._run_start[1:], self._length).astype(np.int64)
        self._previous = previous_runs(self._run_shard)
        self._entries = entry_runs(self._previous, self._run_start, self._run_end,
                                   gap=self.predownload)
        self._position = 0
        self._refresh_at = 0
        self._publish(0)
        self._trim()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._prefetch, daemon=True,
                                          name=f"streaming-cache-{self._slot}.{i}")
                         for i in range(self.prefetch_threads)]
        for thread in self._threads:
            thread.start()

    def advance(self, position: int) -> None:
        """The reader is at step `position` of the sequence given to `follow`."""
        self._position = int(position)
        table = self.table
        table.progress[self._slot] = self._position
        if self._position >= self._refresh_at:
            self._publish(self._position)
        self._wake.set()

    def _publish(self, position: int, window: int = 16) -> None:
        """Write this reader's next distinct shards, and the steps at which it starts and stops
        reading each, into its slot: those of the next `window * horizon` runs, then the new
        shards the prefetcher reaches beyond them (so eviction knows they are wanted)."""
        table = self.table
        h = table.horizon
        r0 = max(int(np.searchsorted(self._run_start, position, side="right")) - 1, 0)
        shards = self._run_shard[r0:r0 + window * h]
        _, first = np.unique(shards, return_index=True)
        near = np.sort(first)[:h] + r0
        far = next_new(self._entries, self._previous, r0, r0 + len(shards),
                       self.prefetch_threads)  # none of their shards is in `near`
        runs = np.concatenate([near, far])[:h]
        ends = self._run_end
        row = np.full(h, -1, np.int64)
        row[:len(runs)] = self._run_shard[runs]
        slot = self._slot
        table.horizon_starts[slot, :len(runs)] = self._run_start[runs]
        table.horizon_ends[slot, :len(runs)] = ends[runs]
        table.horizon_shards[slot] = row
        table.progress[slot] = position
        # Refresh when the current run ends (a shard read again later then shows its next use
        # instead of looking finished), but at most every REFRESH_STEPS steps.
        later = ends[runs[0]] if len(runs) else self._length
        self._refresh_at = max(int(later), position + REFRESH_STEPS)

    # ----- the reader side ---------------------------------------------------------------
    def acquire(self, shard: int, *, wait: bool = True) -> Path | None:
        """The ready raw file of `shard`, pinned (never evicted) until `release(shard)`; with
        `wait=False`, None (and nothing pinned) unless it is present right now."""
        shard = int(shard)
        if not self.cached[shard]:
            return self.preparer.prepare(shard)
        table = self.table
        self._pin(shard)
        if table.state[shard] == tb.PRESENT:  # read after the pin: see _evict
            seen = disk.identity(self.preparer.raw_path(shard))
            if self.preparer.usable(shard):
                self._count(tb.HITS)
                return self.preparer.raw_path(shard)
            self._lost(shard, seen)
        if not wait:
            self._unpin(shard)
            return None
        started = time.monotonic_ns()
        self._count(tb.MISSES)
        try:
            self._wait_present(shard)
        except BaseException:
            self._unpin(shard)
            raise
        finally:
            self._count(tb.WAIT, time.monotonic_ns() - started)
        return self.preparer.raw_path(shard)

    def pinned(self) -> np.ndarray | None:
        """Mask of the shards read under a pin: the cached ones while a cache_limit is in force
        (an open file of an evicted shard would keep its blocks); None without a limit."""
        return self.cached if self.effective_limit() is not None else None

    def present(self, shards: np.ndarray) -> bool:
        """Whether every one of `shards` can be acquired without waiting right now."""
        shards = np.asarray(shards, np.int64)
        mine = shards[self.cached[shards]]
        return not len(mine) or bool(np.all(self.table.state[mine] == tb.PRESENT))

    def release(self, shard: int) -> None:
        """Unpin `shard` (it may be evicted from now on)."""
        if self.cached[int(shard)]:
            self._unpin(int(shard))

    def prepare(self, shard: int) -> Path:
        """Make `shard` ready without keeping it pinned (random access, warm-up)."""
        path = self.acquire(shard)
        self.release(shard)
        return path

    def _lost(self, shard: int, seen: tuple[int, int, int] | None) -> None:
        """A present shard's file (`seen`: its identity when it was found unusable) vanished,
        changed size or fails its digest underneath us (a clean-up script, another job, a full
        disk): forget it, so it is prepared again. Not if another reader replaced it since."""
        table = self.table
        with table.locked():
            if (table.state[shard] != tb.PRESENT
                    or disk.identity(self.preparer.raw_path(shard)) != seen):
                return
            log.warning("cache: %s is missing, truncated or corrupt on disk; fetching it again",
                        self._name(shard))
            for path in self._paths(shard):
                if path is not None:
                    disk.unlink(path)
            table.disk[shard] = 0
            table.state[shard] = tb.ABSENT
        self.preparer.forget(shard)

    def _pin(self, shard: int) -> None:
        pins = self.table.pins[self._slot]
        free = np.flatnonzero(pins < 0)
        if not len(free):
            raise CoordinationError(
                f"reader holds {len(pins)} shards already ({pins.tolist()}); release one before "
                f"acquiring shard {shard}")
        pins[free[0]] = shard

    def _unpin(self, shard: int) -> None:
        pins = self.table.pins[self._slot]
        held = np.flatnonzero(pins == shard)
        if len(held):
            pins[held[0]] = -1

    def _wait_present(self, shard: int) -> None:
        table = self.table
        deadline = Deadline(self.wait_timeout)
        pause = 0.001
        while True:
            if self.flag is not None and (
                    failed := self.flag.error(f"stopped waiting for {self._name(shard)}")):
                raise failed
            error = self._errors.pop(shard, None)
            if error is not None:
                raise error
            state = int(table.state[shard])
            if state == tb.PRESENT or (state == tb.ABSENT and self._bring(shard, -1) == READY):
                return
            if state == tb.PREPARING:
                self._check_owner(shard)
            if deadline.expired():
                raise DownloadTimeoutError(
                    f"{self._name(shard)} was not ready after {self.wait_timeout:g} s "
                    f"({self._why(shard)})")
            time.sleep(min(pause, deadline.remaining()))
            pause = min(pause * 2, 0.01)  # polled shared memory: cheap, and a lag is a stall

    def _why(self, shard: int) -> str:
        table = self.table
        state = tb.STATE_NAMES[int(table.state[shard])]
        if state != "absent" or self.effective_limit() is None:
            return f"state {state}"
        pinned = int(table.disk[table.pinned(table.live_slots())].sum())
        return (f"waiting for room: it needs {self.footprint.download_cost(shard)} bytes, "
                f"cache_limit {self.effective_limit()}, in use {table.used()}, pinned by "
                f"readers {pinned}")

    # ----- preparation under the limit ---------------------------------------------------
    def _bring(self, shard: int, farther_than: int) -> str:
        """Prepare `shard` if it is absent and room can be made: READY once it is present,
        BUSY when another reader is at it, WAIT when the node is at its download or space limit.

        Evicts only shards next needed later than `farther_than` steps (-1: anything unpinned).
        """
        table = self.table
        cost = self.footprint.download_cost(shard)
        raw, _ = self._paths(shard)
        with table.locked():
            state = int(table.state[shard])
            if state != tb.ABSENT:
                return READY if state == tb.PRESENT else BUSY
            limit = self.effective_limit()
            if limit is not None and cost > limit - table.other_bytes:
                raise CacheLimitError(
                    f"{self._name(shard)} needs {cost} bytes in the cache while it is prepared, "
                    f"more than cache_limit={limit} leaves beside {table.other_bytes} bytes "
                    f"of other files in {', '.join(self.dirs)}")
            slots = table.node_downloads
            if slots is not None and int((table.state == tb.PREPARING).sum()) >= slots:
                return WAIT
            if not self._make_room(cost, farther_than):
                return WAIT
            if not self._check_space(shard, cost, farther_than):
                return WAIT
            table.state[shard] = tb.PREPARING
            table.owner[shard] = self._slot + 1
            table.reserved[shard] = cost
        fetched = disk.size(raw) != int(self.preparer.table.raw_bytes[shard])
        try:
            self.preparer.forget(shard)  # its memo may predate an eviction elsewhere
            self.preparer.prepare(shard)
        except BaseException as exc:
            with table.locked():
                self._recover(shard)
                table.fails[shard] += 1
            if disk.disk_full(exc):
                raise self._space_error(shard, cost, disk.free_bytes(raw.parent)) from exc
            raise
        with table.locked():
            raw, zipped = self._paths(shard)
            table.disk[shard] = disk.size(raw) + (disk.size(zipped) if zipped else 0)
            table.reserved[shard] = 0
            table.owner[shard] = 0
            table.state[shard] = tb.PRESENT
        if fetched:
            t = self.preparer.table
            self._count(tb.DOWNLOADS)
            self._count(tb.BYTES, int(t.zip_bytes[shard] or t.raw_bytes[shard]))
            if log.isEnabledFor(logging.DEBUG):
                log.debug("cache: prepared %s", self._name(shard))
        return READY

    def _check_space(self, shard: int, cost: int, farther_than: int) -> bool:
        """Whether the disk has `cost` free bytes for `shard` (caller holds the lock). Under a
        cache_limit, shards are evicted to free what is missing, and False (wait) means the
        shards that could go are still needed sooner or pinned; CacheSpaceError when even
        evicting every cached shard would not make room, or without a limit."""
        table = self.table
        folder = self.preparer.raw_path(shard).parent
        free = disk.free_bytes(folder)
        limit = self.effective_limit()
        if free >= cost:
            return True
        if limit is not None:
            if self._make_room(limit - table.used() + (cost - free), farther_than):
                free = disk.free_bytes(folder)
                if free >= cost:
                    return True
            if int(table.disk[self.cached].sum()) >= cost - free:
                return False
        raise self._space_error(shard, cost, free)

    def _space_error(self, shard: int, cost: int, free: int) -> CacheSpaceError:
        folder = self.preparer.raw_path(shard).parent
        return CacheSpaceError(
            errno.ENOSPC,
            f"no room on the disk of {folder} for {self._name(shard)}: it needs {cost} bytes, "
            f"{free} are free; free some space, or set a cache_limit below what the disk holds")

    def _warn_space(self) -> None:
        """Warn at start-up when the shards still to fetch (at most `cache_limit`'s worth)
        need more than the disks of the cache folders have free."""
        table = self.table
        owner = np.asarray(self.preparer.table.stream_of_shard, np.int64)
        missing = self.cached & (table.state != tb.PRESENT)
        limit = self.effective_limit()
        by_disk: dict[int, tuple[str, int]] = {}
        for s, stream in enumerate(self.preparer.streams):
            mine = missing & (owner == s)
            if not mine.any():
                continue
            folder = stream.local_dir
            need = int(self.footprint.resident[mine].sum())
            try:
                device = os.stat(folder).st_dev
            except OSError:
                continue
            where, before = by_disk.get(device, (str(folder), 0))
            by_disk[device] = (where, before + need)
        for where, need in by_disk.values():
            if limit is not None:
                need = min(need, max(limit - table.used(), 0))
            free = disk.free_bytes(Path(where))
            if need > free:
                log.warning(
                    "the cache in %s may need %d more bytes (%s) but its disk has %d free: "
                    "preparing a shard that does not fit raises CacheSpaceError; set a "
                    "cache_limit below the free space to have shards evicted instead", where,
                    need, "up to cache_limit" if limit is not None else "every shard not yet "
                    "cached", free)

    def _make_room(self, cost: int, farther_than: int) -> bool:
        """Evict until `cost` more bytes fit under the limit (caller holds the lock)."""
        limit = self.effective_limit()
        if limit is None:
            return True
        table = self.table
        free = limit - table.used()
        if free >= cost:
            return True
        alive = table.live_slots()
        distance = next_use(table.horizon_shards[alive], table.horizon_starts[alive],
                            table.horizon_ends[alive], table.progress[alive], table.num_shards)
        evictable = self.cached & (table.state == tb.PRESENT) & ~table.pinned(alive)
        victims = choose_victims(cost, free, sizes=table.disk, evictable=evictable,
                                 distance=distance, farther_than=farther_than)
        if victims is None or not len(victims):
            return False
        table.state[victims] = tb.EVICTING
        # A reader pins first and then reads the state; we set the state and then read pins,
        # so a reader that slipped in between is seen here, or sees EVICTING itself.
        taken = table.pinned(alive)[victims]
        table.state[victims[taken]] = tb.PRESENT
        for victim in victims[~taken].tolist():
            self._remove(victim)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("cache: evicted %s (next use in %s steps)", self._name(victim),
                          "no known" if distance[victim] == np.iinfo(np.int64).max
                          else distance[victim])
        return limit - table.used() >= cost

    def _remove(self, shard: int) -> None:
        """Delete an evicting shard's files and mark it absent (caller holds the lock)."""
        for path in self._paths(shard):
            if path is not None:
                disk.unlink(path)
        self.table.disk[shard] = 0
        self.table.state[shard] = tb.ABSENT
        self._count(tb.EVICTIONS)

    def evict(self, shard: int) -> bool:
        """Evict cached `shard` now (it is downloaded again when next needed); False when it
        is not in the cache, is local-only data, or a reader holds it."""
        shard = int(shard)
        table = self.table
        with table.locked():
            if not self.cached[shard] or table.state[shard] != tb.PRESENT:
                return False
            table.state[shard] = tb.EVICTING
            if table.pinned(table.live_slots())[shard]:  # a reader slipped in: see _make_room
                table.state[shard] = tb.PRESENT
                return False
            self._remove(shard)
        return True

    def evict_coldest(self) -> int | None:
        """Evict the cached shard eviction would pick first (next use farthest away, or never);
        its id, or None when no shard can be evicted now."""
        table = self.table
        with table.locked():
            alive = table.live_slots()
            distance = next_use(table.horizon_shards[alive], table.horizon_starts[alive],
                                table.horizon_ends[alive], table.progress[alive],
                                table.num_shards)
            evictable = np.flatnonzero(self.cached & (table.state == tb.PRESENT)
                                       & ~table.pinned(alive))
            if not len(evictable):
                return None
            victim = int(evictable[np.argmax(distance[evictable])])
            table.state[victim] = tb.EVICTING
            if table.pinned(alive)[victim]:  # a reader slipped in: see _make_room
                table.state[victim] = tb.PRESENT
                return None
            self._remove(victim)
        return victim

    def usage(self) -> int:
        """Bytes the node's cache folders hold or have promised to downloads in flight."""
        return self.table.used()

    def _trim(self) -> None:
        """Bring a cache that is over the limit (left by an earlier, larger run) under it."""
        with self.table.locked():
            self._make_room(0, -1)

    def _check_owner(self, shard: int) -> None:
        """Reset a shard whose preparer died mid-way (its slot's process is gone)."""
        table = self.table
        owner = int(table.owner[shard]) - 1
        if owner < 0 or table.slot_alive(owner):
            return
        with table.locked():
            if table.state[shard] == tb.PREPARING and not table.slot_alive(owner):
                log.debug("cache: recovering %s from a dead preparer", self._name(shard))
                self._recover(shard)

    def _recover(self, shard: int, table: tb.CacheTable | None = None) -> None:
        """Back to absent with its reservation returned and its temp files removed (locked)."""
        table = table if table is not None else self.table
        table.state[shard] = tb.ABSENT
        table.reserved[shard] = 0
        table.owner[shard] = 0
        disk.remove_leftovers(filter(None, self._paths(shard)), stale_only=False)

    # ----- prefetching -------------------------------------------------------------------
    def _prefetch(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._prefetch_step():
                    self._wake.wait(0.05)
                    self._wake.clear()
        except BaseException as exc:  # never lose a failure: the reader re-raises it
            log.debug("cache: prefetcher stopped: %r", exc)

    def _prefetch_step(self) -> bool:
        """Prepare the next absent shard within `predownload` steps or among the next
        `prefetch_threads` new shards (see `lookahead`); True if it did work."""
        table = self.table
        pos = self._position
        lo = max(int(np.searchsorted(self._run_start, pos, side="right")) - 1, 0)
        hi = int(np.searchsorted(self._run_start, pos + self.predownload, side="right"))
        hi = window_end(self._entries, self._previous, lo, hi, self.prefetch_threads)
        window = self._run_shard[lo:hi]
        todo = np.flatnonzero(table.state[window] == tb.ABSENT)
        for k in todo.tolist():
            shard = int(window[k])
            if shard in self._errors or not self.cached[shard]:
                continue
            distance = max(int(self._run_start[lo + k]) - pos, 0)
            try:
                outcome = self._bring(shard, distance)
            except Exception as exc:
                self._errors[shard] = exc
                log.debug("cache: prefetch of %s failed: %s", self._name(shard), exc)
                return True
            if outcome != BUSY:
                return outcome == READY
        return False

    def check(self) -> None:
        """Raise a prefetch failure the reader has not met yet (it meets each one when it
        acquires that shard, so this only matters at the end of a pass)."""
        if self._errors:
            raise next(iter(self._errors.values()))

    def stop(self) -> None:
        """Stop prefetching (the reader may still acquire shards)."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=self.wait_timeout)
        self._threads = []

    # ----- limits and stats --------------------------------------------------------------
    def minimum_limit(self, node_ids: np.ndarray, shard_starts: np.ndarray) -> MinimumLimit:
        """Smallest cache_limit under which the node plan `node_ids` [ranks, workers, n] runs."""
        return minimum_limit(node_ids, self.footprint, shard_starts)

    def check_plan(self, node_ids: np.ndarray, shard_starts: np.ndarray) -> MinimumLimit | None:
        """Refuse (CacheLimitError with the number) a cache_limit the node plan cannot run in."""
        limit = self.effective_limit()
        if limit is None:
            return None
        needed = self.minimum_limit(node_ids, shard_starts)
        check_limit(limit, needed, other_bytes=self.table.other_bytes,
                    where=", ".join(self.dirs))
        return needed

    def stats(self, *, node: bool = True) -> CacheStats:
        """Counters of every reader on the node (default) or of this reader only."""
        table = self.table
        rows = table.counters if node else table.counters[self._slot]
        return CacheStats.from_counters(rows)

    def _count(self, column: int, amount: int = 1) -> None:
        with self._mutex:
            self.table.count(self._slot, column, amount)

    def close(self) -> None:
        """Stop prefetching, unpin everything and give the reader slot back."""
        if self._pid != os.getpid():  # a forked child that never read: the slot is the parent's
            self._reset_runtime()
            return
        self.stop()
        if self._table is not None:
            log.debug("%s (this reader: %s)", self.stats(), self.stats(node=False))
            with self._table.locked():
                self._table.free_slot(self._slot)
            self._table = None

    # ----- helpers -----------------------------------------------------------------------
    def _paths(self, shard: int) -> tuple[Path, Path | None]:
        raw = self.preparer.raw_path(shard)
        zip_name = self.preparer.table.zip_basenames[shard]
        return raw, (raw.parent / zip_name if zip_name else None)

    def _name(self, shard: int) -> str:
        t = self.preparer.table
        stream = self.preparer.streams[int(t.stream_of_shard[shard])]
        name = t.zip_basenames[shard] or t.basenames[shard]
        where = stream.remote_dir or stream.local_dir
        return f"shard {shard} ({str(where).rstrip('/')}/{name})"

