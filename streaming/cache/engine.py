"""The per-reader cache engine: prefetch shards in plan order, keep the node's cache folders under
cache_limit with Belady eviction, and hand readers pinned shard paths.

One engine serves one reader (a DataLoader worker, or a thread in tests). All engines that use
the same cache folders on a node share one `CacheTable` in shared memory, so a shard is prepared
once per node, space is reserved before any byte is written, and a shard a reader holds is never
evicted. Actual copying, decompression and verification is the `ShardPreparer`'s job.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from streaming.cache import disk
from streaming.cache import table as tb
from streaming.cache.facts import ShardFacts
from streaming.cache.limit import Footprint
from streaming.cache.lookahead import ReaderRuns, horizon_runs, prefetch_window
from streaming.cache.prepare import ShardPreparer, zipless_shards
from streaming.cache.room import BUSY, READY, CacheRoom
from streaming.cache.stats import CacheStats
from streaming.coord.flag import FailureFlag
from streaming.coord.names import Namespace
from streaming.coord.wait import Deadline, Flag
from streaming.errors import ArgumentError, CoordinationError, DownloadTimeoutError
from streaming.storage.retry import RetryPolicy
from streaming.util.units import parse_bytes

if TYPE_CHECKING:
    from streaming.stream import Stream

log = logging.getLogger(__name__)

PREPARE_THREADS = 4  # shards prepared at once (decompression and downloads release the GIL)
LOCK_SLACK = 4096  # bytes reserved per preparation for the small lock files it creates
REFRESH_STEPS = 8  # a reader rewrites its horizon at most this often (in samples)
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


def _drop_table(token: str) -> None:
    """Unmap this process's table `token` (and remove it from shared memory if this process
    created it); the next reader creates it again from what is on disk."""
    # Under the table's file lock: no _tables_lock here (_shared_table takes them the other way).
    table = _tables.pop((os.getpid(), token), None)
    if table is not None:
        table.close()


def shard_footprint(facts: ShardFacts, streams: Sequence[Stream]) -> Footprint:
    """Cache bytes per shard: nothing for local-only streams, the raw file (and
    a kept zip) while cached, the zip (unless it never lands on disk) and lock files while
    being prepared."""
    owner = np.asarray(facts.stream_of_shard, np.int64)
    cached = np.array([stream.remote_dir is not None for stream in streams], bool)[owner]
    keep = np.array([bool(stream.keep_zip) for stream in streams], bool)[owner]
    return Footprint.of(facts.raw_bytes, facts.zip_bytes, keep, cached, LOCK_SLACK,
                        zipless=zipless_shards(facts, streams))


class CacheEngine(CacheRoom):
    """Node-coordinated shard cache for one reader over a `ShardPreparer`'s shards.

    `follow(shards)` gives the reader's future shard sequence (one entry per sample) and starts
    prefetching `predownload` samples ahead; `advance(i)` reports progress; `acquire(shard)`
    returns the ready raw file, pinned until `release(shard)`.
    """

    def __init__(self, preparer: ShardPreparer, *, cache_limit: int | str | None = None,
                 predownload: int = 64, max_downloads: int | None = 8,
                 prefetch_threads: int = PREPARE_THREADS, wait_timeout: float | None = None,
                 flag: Flag | None = None) -> None:
        self.preparer = preparer
        self.footprint = shard_footprint(preparer.facts, preparer.streams)
        self.cached = self.footprint.resident > 0  # raw shards are never empty
        self.limit = None if cache_limit is None else parse_bytes(cache_limit)
        self.predownload = max(int(predownload), 1)
        self.max_downloads = None if max_downloads is None else max(int(max_downloads), 1)
        self.prefetch_threads = max(int(prefetch_threads), 1)
        self.wait_timeout = wait_timeout if wait_timeout is not None else self._default_wait()
        self.flag = flag
        owner = np.asarray(preparer.facts.stream_of_shard, np.int64)
        self.dirs = sorted({str(preparer.streams[s].local_dir)
                            for s in set(owner[self.cached].tolist())})
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
        facts = self.preparer.facts
        digest = hashlib.blake2b(digest_size=8)
        for shard in np.flatnonzero(self.cached):
            digest.update(f"{facts.basenames[shard]}:{int(facts.raw_bytes[shard])}:"
                          f"{sorted(facts.raw_hashes[shard].items())}\0".encode())
        return Namespace.derive(self.dirs, job=None, salt=f"{digest.hexdigest()}{tb.MAGIC:x}",
                                instance="cache").token

    def _reset_runtime(self) -> None:
        self._pid = os.getpid()
        self._table: tb.CacheTable | None = None
        self._slot = -1
        self._closed: tuple[CacheStats, CacheStats] | None = None  # the counters at close()
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

    # ----- the reader's plan -------------------------------------------------------------
    def follow(self, shards: np.ndarray) -> None:
        """Start prefetching for a reader that will read one sample of `shards[i]` per step i."""
        self.stop()
        self._errors.clear()  # a new pass tries again what failed in the last one
        seq = np.asarray(shards, np.int64).reshape(-1)
        if len(seq) and (int(seq.min()) < 0 or int(seq.max()) >= len(self.cached)):
            raise ArgumentError(f"follow() needs shard ids in [0, {len(self.cached)}) (drop the -1 "
                             "padding of a plan before mapping ids to shards)")
        runs = ReaderRuns.of(seq, gap=self.predownload)
        self._run_start, self._run_shard, self._run_end = runs.start, runs.shard, runs.end
        self._previous, self._entries, self._length = runs.previous, runs.entries, runs.length
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
        runs = horizon_runs(self._run_shard, self._entries, self._previous, r0, h,
                            self.prefetch_threads, window)
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
                self._errors.pop(shard, None)  # fetched since a prefetch of it failed
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

    def lost(self, shard: int, path: Path) -> bool:
        """The file `acquire` returned was gone when the reader opened it (deleted after the
        pin): forget it so that the next `acquire` fetches it again; False for a shard this
        engine does not cache.

        Args:
            shard: the shard whose file vanished.
            path: the file `acquire` returned.
        """
        if not self.cached[int(shard)]:
            return False
        self._lost(int(shard), disk.identity(path))
        return True

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
            self.preparer.remove_files(shard)
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
            state = int(table.state[shard])
            error = self._errors.pop(shard, None)
            if error is not None and state != tb.PRESENT:
                raise error
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
        lo, hi = prefetch_window(self._run_start, self._entries, self._previous, pos,
                                 self.predownload, self.prefetch_threads)
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
        acquires that shard, so this only matters at the end of a pass), unless the shard has
        been fetched since."""
        for shard, error in list(self._errors.items()):
            if int(self.table.state[shard]) != tb.PRESENT:
                raise error
            self._errors.pop(shard, None)

    def stop(self) -> None:
        """Stop prefetching (the reader may still acquire shards)."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=self.wait_timeout)
        self._threads = []

    # ----- stats -----------------------------------------------------------------------
    def stats(self, *, node: bool = True) -> CacheStats:
        """Counters of every reader on the node (default) or of this reader only; after
        `close()`, as they were then (the table may be gone)."""
        if self._table is None and self._closed is not None and self._pid == os.getpid():
            return self._closed[0 if node else 1]
        table = self.table
        rows = table.counters if node else table.counters[self._slot]
        return CacheStats.from_counters(rows)

    def close(self) -> None:
        """Stop prefetching, unpin everything and give the reader slot back."""
        if self._pid != os.getpid():  # a forked child that never read: the slot is the parent's
            self._reset_runtime()
            return
        self.stop()
        if self._table is not None:
            self._closed = (self.stats(), self.stats(node=False))
            log.debug("%s (this reader: %s)", *self._closed)
            with self._table.locked():
                self._table.free_slot(self._slot)
                if not self._table.live_slots().any():  # the last reader: drop the table
                    _drop_table(self.token)
            self._table = None
