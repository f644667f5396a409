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

from streaming.cache.engine.cache_space import BringOutcome, CacheSpace
from streaming.cache.engine.landed_signal import Landings
from streaming.cache.engine.reader_drift import ReaderDrift, job_word
from streaming.cache.engine.shard_files import ShardFiles
from streaming.cache.folder import disk_files as disk
from streaming.cache.policy.cache_limit import CacheLimit, LimitValue
from streaming.cache.policy.lookahead import ReaderRuns, horizon_runs, prefetch_window
from streaming.cache.policy.minimum_limit import Footprint, MinimumLimit
from streaming.cache.prepare.preparer import ShardPreparer, zipless_shards
from streaming.cache.shard_facts import ShardFacts
from streaming.cache.table import node_table as tb
from streaming.cache.table.cache_stats import CacheStats
from streaming.cache.table.process_tables import drop_table
from streaming.cache.table.reader_slot import ReaderSlot
from streaming.coord.flag import FailureFlag
from streaming.coord.names import Namespace
from streaming.coord.wait import Deadline, Flag
from streaming.errors import ArgumentError, DownloadTimeoutError
from streaming.storage.retry import RetryPolicy

if TYPE_CHECKING:
    from streaming.cache.prepare.stream_files import StreamFiles

log = logging.getLogger(__name__)

PREPARE_THREADS = 4  # shards prepared at once (decompression and downloads release the GIL)
LOCK_SLACK = 4096  # bytes reserved per preparation for the small lock files it creates


def shard_footprint(facts: ShardFacts, streams: Sequence[StreamFiles]) -> Footprint:
    """Cache bytes per shard: nothing for local-only streams and streams read in place, the raw
    file (and a kept zip) while cached, the zip (unless it never lands on disk) and lock files
    while being prepared."""
    owner = np.asarray(facts.stream_of_shard, np.int64)
    cached = np.array([stream.remote_dir is not None for stream in streams],
                      bool)[owner] & ~facts.in_place
    keep = np.array([bool(stream.keep_zip) for stream in streams], bool)[owner]
    return Footprint.of(facts.raw_bytes, facts.zip_bytes, keep, cached, LOCK_SLACK,
                        zipless=zipless_shards(facts, streams))


class CacheEngine:
    """Node-coordinated shard cache for one reader over a `ShardPreparer`'s shards.

    `follow(shards)` gives the reader's future shard sequence (one entry per sample) and starts
    prefetching `predownload` samples ahead; `advance(i)` reports progress; `acquire(shard)`
    returns the ready raw file, pinned until `release(shard)`. Room for each shard is made by
    the reader's `CacheSpace`, over the reader's `ReaderSlot` of the node table.

    Args:
        preparer: what fetches, decompresses and verifies each shard.
        cache_limit: the limit this process asks for (a `CacheLimit`, bytes, "10gb"; None: no
            limit); the node's limit is the smallest a live reader asked for (`node_limit`).
        predownload: samples ahead of the reader that prefetching prepares.
        max_downloads: preparations the node runs at once (None: any number).
        prefetch_threads: this reader's prefetching threads.
        wait_timeout: seconds a reader waits for one shard (default: from the streams'
            download timeouts and retries).
        flag: the node's failure flag, checked while waiting.
        job: the reader's job on the node, whose slowest reader it keeps near (`drift`).
    """

    def __init__(self, preparer: ShardPreparer, *, cache_limit: LimitValue = None,
                 predownload: int = 64, max_downloads: int | None = 8,
                 prefetch_threads: int = PREPARE_THREADS, wait_timeout: float | None = None,
                 flag: Flag | None = None, job: str | None = None) -> None:
        self.preparer = preparer
        self.footprint = shard_footprint(preparer.facts, preparer.streams)
        self.cached = self.footprint.resident > 0  # raw shards are never empty
        self.asked_limit = CacheLimit.parse(cache_limit)
        self.predownload = max(int(predownload), 1)
        self.max_downloads = None if max_downloads is None else max(int(max_downloads), 1)
        self.prefetch_threads = max(int(prefetch_threads), 1)
        self.wait_timeout = wait_timeout if wait_timeout is not None else self._default_wait()
        self.flag = flag
        self.drift = ReaderDrift(job_word(job))  # its steps: `check_plan`
        owner = np.asarray(preparer.facts.stream_of_shard, np.int64)
        self.dirs = sorted({str(preparer.streams[s].local_dir)
                            for s in set(owner[self.cached].tolist())})
        self.files = ShardFiles(preparer, self.cached, self.dirs)
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
        self._space: CacheSpace | None = None  # this process's attachment to the node table
        self._closed: tuple[CacheStats, CacheStats] | None = None  # the counters at close()
        self._errors: dict[int, BaseException] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._landings = Landings()
        self._runs = ReaderRuns.of(np.zeros(0, np.int64), gap=1)  # the sequence `follow` gave
        self._position = 0
        self._refresh_at = 0

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
    def space(self) -> CacheSpace:
        """This reader's room in the node's cache: the node table attached (and a reader slot
        claimed) on first use, and again in a forked child (a DataLoader worker): the parent's
        slot, pins and horizon are not its own."""
        if self._pid != os.getpid():
            self._reset_runtime()
        if self._space is None:
            asked = self.asked_limit.nbytes if self.asked_limit is not None else 0
            reader = ReaderSlot.join(self.token, len(self.cached), self.files.scan,
                                     limit=asked, downloads=self.max_downloads or 0,
                                     on_dead_owner=self.files.recover)
            self._space = CacheSpace(self.files, self.footprint, reader)
        return self._space

    @property
    def table(self) -> tb.CacheTable:
        """The node table (attached on first use, see `space`)."""
        return self.space.table

    @property
    def slot(self) -> ReaderSlot:
        """This reader's row of the node table (claimed on first use, see `space`)."""
        return self.space.reader

    def attach(self) -> CacheEngine:
        """Join the node table now (the first process creates it and keeps it alive: call
        this in the training process before DataLoader workers start)."""
        self.space.warn_if_short()
        return self

    # ----- the node's space --------------------------------------------------------------
    def node_limit(self) -> int | None:
        """The node's limit in bytes: the smallest a live process of these folders asked for."""
        return self.space.node_limit

    def usage(self) -> int:
        """Bytes the node's cache folders hold or have promised to downloads in flight."""
        return self.space.usage()

    def evict(self, shard: int) -> bool:
        """Evict cached `shard` now (it is downloaded again when next needed); False when it
        is not in the cache, is local-only data, or a reader holds it.

        Args:
            shard: the shard to evict.
        """
        return self.space.evict(shard)

    def evict_coldest(self) -> int | None:
        """Evict the cached shard eviction would pick first (next use farthest away, or never);
        its id, or None when no shard can be evicted now."""
        return self.space.evict_coldest()

    def check_plan(self, node_ids: np.ndarray, shard_starts: np.ndarray,
                   unit: int = 1) -> MinimumLimit | None:
        """Refuse (CacheLimitError with the number) a cache_limit the node plan cannot run in,
        and set `drift.steps` from the limit's room over the plan (`drift_bound`).

        Args:
            node_ids: the node plan's sample ids [ranks, workers, n].
            shard_starts: the first sample id of each shard.
            unit: samples a reader reads at a step (the plan's batch size).
        """
        needed = self.space.check_plan(node_ids, shard_starts, unit)
        self.drift.steps = self.space.drift_steps(node_ids, shard_starts, unit)
        return needed

    # ----- the reader's plan -------------------------------------------------------------
    def follow(self, shards: np.ndarray) -> None:
        """Start prefetching for a reader that will read one sample of `shards[i]` per step i."""
        space = self.space  # first, since in a forked child it resets what is set below
        self.stop()
        self._errors.clear()  # a new pass tries again what failed in the last one
        seq = np.asarray(shards, np.int64).reshape(-1)
        if len(seq) and (int(seq.min()) < 0 or int(seq.max()) >= len(self.cached)):
            raise ArgumentError(f"follow() needs shard ids in [0, {len(self.cached)}) (drop the -1 "
                             "padding of a plan before mapping ids to shards)")
        self._runs = ReaderRuns.of(seq, gap=self.predownload)
        self._position = 0
        self._refresh_at = 0
        self._publish(0)
        self.drift.enter(self.slot)
        space.trim()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._prefetch, daemon=True,
                                          name=f"streaming-cache-{self.slot.index}.{i}")
                         for i in range(self.prefetch_threads)]
        for thread in self._threads:
            thread.start()

    def advance(self, position: int) -> None:
        """The reader is at step `position` of the sequence given to `follow`; under a limit, it
        waits first while it is too far ahead of the slowest reader of its job (`ReaderDrift`)."""
        self._position = int(position)
        if self._position >= self._refresh_at:
            self._publish(self._position)
        else:
            self.slot.advance(self._position)
        self._wake.set()
        self.drift.hold(self.slot, self._position, self.flag)

    def _publish(self, position: int, window: int = 16) -> None:
        """Write this reader's next distinct shards, and the steps at which it starts and stops
        reading each, into its slot: those of the next `window * horizon` runs, then the new
        shards the prefetcher reaches beyond them (so eviction knows they are wanted)."""
        reader = self.slot
        seq = self._runs
        r0 = max(int(np.searchsorted(seq.start, position, side="right")) - 1, 0)
        runs = horizon_runs(seq.shard, seq.entries, seq.previous, r0,
                            reader.table.horizon, self.prefetch_threads, window)
        reader.publish(seq.shard[runs], seq.start[runs], seq.end[runs], position)
        # Publish again once the current run ends: until then every listed run is still ahead
        # (runs follow one another), so no shard read again later looks finished.
        self._refresh_at = int(seq.end[runs[0]]) if len(runs) else seq.length

    # ----- the reader side ---------------------------------------------------------------
    def acquire(self, shard: int, *, wait: bool = True) -> Path | None:
        """The ready raw file of `shard`, pinned (never evicted) until `release(shard)`; with
        `wait=False`, None (and nothing pinned) unless it is present right now."""
        shard = int(shard)
        if not self.cached[shard]:
            return self.preparer.prepare(shard)
        space, reader = self.space, self.slot
        reader.pin(shard)
        if space.table.state[shard] == tb.PRESENT:  # read after the pin: see CacheSpace
            seen = disk.identity(self.preparer.raw_path(shard))
            if self.preparer.usable(shard):
                reader.count(tb.HITS)
                self._errors.pop(shard, None)  # fetched since a prefetch of it failed
                return self.preparer.raw_path(shard)
            space.forget(shard, seen)
        if not wait:
            reader.unpin(shard)
            return None
        started = time.monotonic_ns()
        reader.count(tb.MISSES)
        try:
            self._wait_present(shard)
        except BaseException:
            reader.unpin(shard)
            raise
        finally:
            reader.count(tb.WAIT, time.monotonic_ns() - started)
        return self.preparer.raw_path(shard)

    def pinned(self) -> np.ndarray | None:
        """Mask of the shards read under a pin: the cached ones while a cache_limit is in force
        (an open file of an evicted shard would keep its blocks); None without a limit."""
        return self.cached if self.node_limit() is not None else None

    def present(self, shards: np.ndarray) -> bool:
        """Whether every one of `shards` can be acquired without waiting right now."""
        shards = np.asarray(shards, np.int64)
        mine = shards[self.cached[shards]]
        return not len(mine) or bool(np.all(self.table.state[mine] == tb.PRESENT))

    def release(self, shard: int) -> None:
        """Unpin `shard` (it may be evicted from now on)."""
        if self.cached[int(shard)]:
            self.slot.unpin(int(shard))

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
        self.space.forget(int(shard), disk.identity(path))
        return True

    def _wait_present(self, shard: int) -> None:
        space = self.space
        deadline = Deadline(self.wait_timeout)
        pause = 0.001
        while True:
            landed = self._landings.seen()
            if self.flag is not None and self.flag.reason() is not None and (
                    failed := self.flag.error(f"stopped waiting for {self.files.describe(shard)}")):
                raise failed
            state = int(space.table.state[shard])
            error = self._errors.pop(shard, None)
            if error is not None and state != tb.PRESENT:
                raise error
            if state == tb.PRESENT or (state == tb.ABSENT and space.bring(shard, -1)
                                       == BringOutcome.PRESENT):
                return
            if state == tb.PREPARING:
                space.recover_if_orphaned(shard)
            if deadline.expired():
                raise DownloadTimeoutError(
                    f"{self.files.describe(shard)} was not ready after {self.wait_timeout:g} s "
                    f"({space.explain_wait(shard)})")
            self._landings.wait(landed, min(pause, deadline.remaining()))
            pause = min(pause * 2, 0.01)  # polled shared memory: cheap, and a lag is a stall

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
        space, pos, seq = self.space, self._position, self._runs
        lo, hi = prefetch_window(seq.start, seq.entries, seq.previous, pos,
                                 self.predownload, self.prefetch_threads)
        window = seq.shard[lo:hi]
        todo = np.flatnonzero(space.table.state[window] == tb.ABSENT)
        for k in todo.tolist():
            shard = int(window[k])
            if shard in self._errors or not self.cached[shard]:
                continue
            distance = max(int(seq.start[lo + k]) - pos, 0)
            try:  # `pos` may be stale by now: a run its reader has finished must not come back
                outcome = space.bring(shard, distance,
                                      lambda end=int(seq.end[lo + k]): self._position >= end)
            except Exception as exc:
                self._errors[shard] = exc
                log.debug("cache: prefetch of %s failed: %s", self.files.describe(shard), exc)
                self._landings.announce()
                return True
            if outcome == BringOutcome.PRESENT:
                self._landings.announce()
            if outcome != BringOutcome.IN_PROGRESS:  # PASSED: look again from the reader's step
                return outcome in (BringOutcome.PRESENT, BringOutcome.PASSED)
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
        """Stop prefetching (the reader may still acquire shards) and stop counting as a
        reader of its pass: no reader of its job waits for it any longer."""
        if self._space is not None and self._pid == os.getpid():
            self._space.reader.leave_pass()
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=self.wait_timeout)
        self._threads = []

    def end(self) -> None:
        """The reader's pass is over: stop prefetching and withdraw its horizon."""
        self.stop()
        self.withdraw()

    def withdraw(self) -> None:
        """Withdraw the horizon of the pass that stopped last, so that eviction no longer
        keeps the shards it would have read next (a pass under way keeps its own)."""
        if self._space is not None and self._pid == os.getpid() and not self._threads:
            none = np.zeros(0, np.int64)
            self._space.reader.publish(none, none, none, 0)

    # ----- stats -----------------------------------------------------------------------
    def stats(self, *, node: bool = True) -> CacheStats:
        """Counters of every reader on the node (default) or of this reader only; after
        `close()`, as they were then (the table may be gone)."""
        if self._space is None and self._closed is not None and self._pid == os.getpid():
            return self._closed[0 if node else 1]
        reader = self.slot
        if node:
            return reader.table.node_stats()
        return CacheStats.from_counters(reader.table.counters[reader.index])

    def close(self) -> None:
        """Stop prefetching, unpin everything and give the reader slot back."""
        if self._pid != os.getpid():  # a forked child that never read: the slot is the parent's
            self._reset_runtime()
            return
        self.stop()
        if self._space is not None:
            self._closed = (self.stats(), self.stats(node=False))
            log.debug("%s (this reader: %s)", *self._closed)
            reader = self._space.reader
            with reader.table.locked():
                if reader.free():  # the last reader: drop the table
                    drop_table(self.token)
            self._space = None
