"""The space side of the cache: prepare a shard only when room can be made for it under the
node's cache_limit and on its disk, evict (Belady: the shard next needed farthest away) to make
that room, and recover shards whose preparer died or whose file vanished.

Every state change happens under the node table's lock; a reader's pins are its own slot's row.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from streaming.cache.engine.shard_files import ShardFiles
from streaming.cache.folder import disk_files as disk
from streaming.cache.policy.drift_bound import drift_batches
from streaming.cache.policy.eviction import NEVER, choose_victims, worth_bringing
from streaming.cache.policy.minimum_limit import Footprint, MinimumLimit, check_limit, minimum_limit
from streaming.cache.table import node_table as tb
from streaming.cache.table import reader_horizon as horizon
from streaming.cache.table.reader_slot import ReaderSlot
from streaming.errors import CacheLimitError, CacheSpaceError

log = logging.getLogger("streaming.cache.engine.cache_engine")  # one logger for all the engine does

# Share of the cache_limit that prefetches in flight may hold between them (one may always
# start). A preparation holds its compressed and raw bytes until it ends; without this cap, many
# prefetches under a tight limit crowd out the shards readers are reading, which are then evicted
# and fetched again.
PREFETCH_SHARE = 0.5
# Evictions of shards still needed on a node before their share of its evictions can warn.
THRASHING_EVICTIONS = 32


class BringOutcome(enum.Enum):
    """What `CacheSpace.bring` found or did."""

    PRESENT = "present"  # the shard is on disk, ready to read
    IN_PROGRESS = "in progress"  # another reader is preparing it
    AT_LIMIT = "at limit"  # the node is at its download or space limit: try again later
    PASSED = "passed"  # a prefetch whose reader has read past the use it was for: nothing done


class CacheSpace:
    """Preparation under the limit, eviction and disk accounting for one reader of the node
    table: what the reader and its prefetchers call to bring a shard in.

    Args:
        files: the cached shards' files.
        footprint: what each shard occupies while cached and while being prepared.
        reader: the reader's slot (preparations are marked its own, counters are its own).
    """

    def __init__(self, files: ShardFiles, footprint: Footprint, reader: ReaderSlot) -> None:
        self.files = files
        self.footprint = footprint
        self.reader = reader
        self.table = reader.table

    @property
    def node_limit(self) -> int | None:
        """The node's limit: the smallest any process sharing these folders asked for."""
        return self.table.node_limit

    def usage(self) -> int:
        """Bytes the node's cache folders hold or have promised to downloads in flight."""
        return self.table.used()

    def bring(self, shard: int, farther_than: int,
              passed: Callable[[], bool] | None = None) -> BringOutcome:
        """Prepare `shard` if it is absent and room can be made for it; evicts only shards next
        needed later than `farther_than` steps (-1: anything unpinned).

        Args:
            shard: the shard to bring in.
            farther_than: the distance, in the reader's steps, of the use it is brought for.
            passed: for a prefetch, whether its reader has by now read past the use the shard
                is brought for. Asked under the table's lock before anything is evicted: a
                prefetcher decides from the step its reader was at when it looked, and its
                reader may have finished that run since (and another reader evicted the shard
                as needed by nobody); bringing it back then would evict a shard that is still
                needed, for one that is not (`BringOutcome.PASSED`).
        """
        cost = self.footprint.download_cost(shard)
        outcome = self._reserve(shard, cost, farther_than, passed)
        if outcome is not None:
            return outcome
        table = self.table
        raw, _ = self.files.paths(shard)
        preparer = self.files.preparer
        fetched = disk.size(raw) != int(preparer.facts.raw_bytes[shard])
        try:
            preparer.forget(shard)  # its memo may predate an eviction elsewhere
            preparer.prepare(shard)
        except BaseException as exc:
            with table.locked():
                self.files.recover(table, shard)
                table.fails[shard] += 1
            if disk.disk_full(exc):
                raise self._space_error(shard, cost, disk.free_bytes(raw.parent)) from exc
            raise
        with table.locked():
            table.disk[shard] = self.files.bytes_on_disk(shard)
            table.reserved[shard] = 0
            table.owner[shard] = 0
            table.state[shard] = tb.PRESENT
        if fetched:
            facts = preparer.facts
            self.reader.count(tb.DOWNLOADS)
            self.reader.count(tb.BYTES, int(facts.zip_bytes[shard] or facts.raw_bytes[shard]))
            if log.isEnabledFor(logging.DEBUG):
                log.debug("cache: prepared %s", self.files.describe(shard))
        return BringOutcome.PRESENT

    def _reserve(self, shard: int, cost: int, farther_than: int,
                 passed: Callable[[], bool] | None = None) -> BringOutcome | None:
        """Mark `shard` preparing by this reader with `cost` bytes reserved; None when done, the
        outcome to report when the shard is not absent, its use has `passed`, or the node is at
        a limit."""
        table = self.table
        with table.locked():
            state = int(table.state[shard])
            if state != tb.ABSENT:
                return BringOutcome.PRESENT if state == tb.PRESENT else BringOutcome.IN_PROGRESS
            if passed is not None and passed():
                return BringOutcome.PASSED
            limit = self.node_limit
            if limit is not None and cost > limit - table.other_bytes:
                raise CacheLimitError(
                    f"{self.files.describe(shard)} needs {cost} bytes in the cache while it is "
                    f"prepared, more than cache_limit={limit} leaves beside "
                    f"{table.other_bytes} bytes of other files in {', '.join(self.files.dirs)}")
            slots = table.node_downloads
            if slots is not None and int((table.state == tb.PREPARING).sum()) >= slots:
                return BringOutcome.AT_LIMIT
            alive = None  # the live readers, looked up (in /proc) at most once here
            if farther_than > 0 and limit is not None:
                if self._prefetches_full(cost, limit):
                    return BringOutcome.AT_LIMIT
                alive = table.live_slots(recent=True)
                if not self._worth_bringing(shard, cost, farther_than, limit, alive):
                    return BringOutcome.AT_LIMIT
            if not self._make_room(cost, farther_than, alive):
                return BringOutcome.AT_LIMIT
            if not self._check_space(shard, cost, farther_than):
                return BringOutcome.AT_LIMIT
            table.state[shard] = tb.PREPARING
            table.owner[shard] = self.reader.index + 1
            table.reserved[shard] = cost
        return None

    def _prefetches_full(self, cost: int, limit: int) -> bool:
        """Whether a prefetch of `cost` bytes would take the preparations in flight past
        PREFETCH_SHARE of the limit (caller holds the lock)."""
        flight = int(self.table.reserved.sum())
        return flight > 0 and flight + cost > PREFETCH_SHARE * limit

    def _worth_bringing(self, shard: int, cost: int, at: int, limit: int,
                        alive: np.ndarray) -> bool:
        """Whether a prefetch of `shard` for a use `at` steps away belongs among the shards the
        limit holds, by the horizons of the `alive` readers (evict.worth_bringing; caller holds
        the lock)."""
        table = self.table
        preparing = table.state == tb.PREPARING
        in_flight = int((table.reserved[preparing] - self.footprint.resident[preparing]).sum())
        return worth_bringing(shard, at, cost, distance=self._distances(alive),
                              sizes=self.footprint.resident, wanted=self.files.cached,
                              room=limit - table.other_bytes, in_flight=in_flight)

    def _check_space(self, shard: int, cost: int, farther_than: int) -> bool:
        """Whether the disk has `cost` free bytes for `shard` beside what the preparations in
        flight have reserved and not yet written (caller holds the lock). Under a cache_limit,
        shards are evicted to free what is missing. False (wait) means the shards that could
        go are still needed sooner or pinned, or preparations in flight may still settle;
        CacheSpaceError when nothing is in flight and even evicting every cached shard (or,
        without a limit, anything) would not make room."""
        table = self.table
        folder = self.files.preparer.raw_path(shard).parent
        if disk.free_bytes(folder) - int(table.reserved.sum()) >= cost:
            return True  # room even if nothing in flight had written a byte yet
        pending = self.files.unwritten(table)
        free = disk.free_bytes(folder) - pending
        if free >= cost:
            return True
        limit = self.node_limit
        if limit is not None:
            if self._make_room(limit - table.used() + (cost - free), farther_than):
                free = disk.free_bytes(folder) - pending
                if free >= cost:
                    return True
            if int(table.disk[self.files.cached].sum()) >= cost - free:
                return False
        if pending:
            return False
        raise self._space_error(shard, cost, free)

    def _space_error(self, shard: int, cost: int, free: int) -> CacheSpaceError:
        folder = self.files.preparer.raw_path(shard).parent
        return CacheSpaceError(
            errno.ENOSPC,
            f"no room on the disk of {folder} for {self.files.describe(shard)}: it needs {cost} "
            f"bytes, {free} are free; free some space, or set a cache_limit below what the disk "
            "holds")

    def warn_if_short(self) -> None:
        """Warn when the shards still to fetch (at most `cache_limit`'s worth) need more than
        the disks of the cache folders have free."""
        table = self.table
        preparer = self.files.preparer
        owner = np.asarray(preparer.facts.stream_of_shard, np.int64)
        missing = self.files.cached & (table.state != tb.PRESENT)
        limit = self.node_limit
        by_disk: dict[int, tuple[str, int]] = {}
        for s, stream in enumerate(preparer.streams):
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

    def _distances(self, alive: np.ndarray) -> np.ndarray:
        """Steps until each shard's next use by a live reader (int64 max: none known)."""
        return horizon.snapshot(self.table, alive).next_use(self.table.num_shards)

    def _make_room(self, cost: int, farther_than: int, alive: np.ndarray | None = None, *,
                   trimming: bool = False) -> bool:
        """Evict until `cost` more bytes fit under the limit (caller holds the lock; `alive`:
        the live readers when the caller has just looked them up; `trimming`: a cache left
        over the limit by an earlier run, whose evictions say nothing of this run's limit)."""
        limit = self.node_limit
        if limit is None:
            return True
        table = self.table
        free = limit - table.used()
        if free >= cost:
            return True
        alive = table.live_slots(recent=True) if alive is None else alive
        distance = self._distances(alive)
        evictable = self.files.cached & (table.state == tb.PRESENT) & ~table.pinned(alive)
        victims = choose_victims(cost, free, sizes=table.disk, evictable=evictable,
                                 distance=distance, farther_than=farther_than)
        if victims is None or not len(victims):
            return False
        table.state[victims] = tb.EVICTING
        # A reader pins first and then reads the state; we set the state and then read pins,
        # so a reader that slipped in between is seen here, or sees EVICTING itself.
        taken = table.pinned(alive)[victims]
        table.state[victims[taken]] = tb.PRESENT
        gone = victims[~taken]
        known = distance[gone] != NEVER
        needed = known & (not trimming)
        for victim, still_needed, use in zip(gone.tolist(), needed.tolist(), known.tolist()):
            self._remove(victim, needed=still_needed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("cache: evicted %s (next use in %s steps)", self.files.describe(victim),
                          distance[victim] if use else "no known")
        if needed.any():
            self._warn_if_thrashing()
        return limit - table.used() >= cost

    def _warn_if_thrashing(self) -> None:
        """Warn, once per node, when most of the node's evictions remove shards a running
        reader still needs: the limit holds less than the readers use at once, and each of those
        shards is downloaded again (caller holds the lock)."""
        table = self.table
        if table.warning_given(tb.THRASHING):
            return
        stats = table.node_stats()
        if (stats.needed_evictions < THRASHING_EVICTIONS
                or 2 * stats.needed_evictions <= stats.evictions):
            return
        table.mark_warning_given(tb.THRASHING)
        log.warning(
            "cache: %d of the node's %d evictions so far removed a shard a running reader still "
            "needed, and each is downloaded again: cache_limit=%d holds less than the node's "
            "readers use at once. Readers that drift apart (ranks that do not synchronise every "
            "step, DataLoader workers far apart) need more room: raise cache_limit toward the "
            "node's share of the data (`streaming plan --cache-limit` predicts the downloads) "
            "or keep the ranks in step", stats.needed_evictions, stats.evictions,
            self.node_limit)

    def _remove(self, shard: int, *, needed: bool = False) -> None:
        """Delete an evicting shard's files and mark it absent (caller holds the lock;
        `needed`: a running reader still needs it)."""
        self.files.preparer.remove_files(shard)
        self.table.disk[shard] = 0
        self.table.state[shard] = tb.ABSENT
        self.reader.count(tb.EVICTIONS)
        if needed:
            self.reader.count(tb.NEEDED_EVICTIONS)

    def _evict_unpinned(self, shard: int, alive: np.ndarray) -> bool:
        """Evict present `shard` unless a reader pins it (caller holds the lock)."""
        table = self.table
        table.state[shard] = tb.EVICTING
        if table.pinned(alive)[shard]:  # a reader slipped in: see _make_room
            table.state[shard] = tb.PRESENT
            return False
        self._remove(shard)
        return True

    def evict(self, shard: int) -> bool:
        """Evict cached `shard` now (it is downloaded again when next needed); False when it
        is not in the cache, is local-only data, or a reader holds it.

        Args:
            shard: the shard to evict.
        """
        shard = int(shard)
        table = self.table
        with table.locked():
            if not self.files.cached[shard] or table.state[shard] != tb.PRESENT:
                return False
            return self._evict_unpinned(shard, table.live_slots(recent=True))

    def evict_coldest(self) -> int | None:
        """Evict the cached shard eviction would pick first (next use farthest away, or never);
        its id, or None when no shard can be evicted now."""
        table = self.table
        with table.locked():
            alive = table.live_slots(recent=True)
            distance = self._distances(alive)
            evictable = np.flatnonzero(self.files.cached & (table.state == tb.PRESENT)
                                       & ~table.pinned(alive))
            if not len(evictable):
                return None
            victim = int(evictable[np.argmax(distance[evictable])])
            return victim if self._evict_unpinned(victim, alive) else None

    def trim(self) -> None:
        """Bring a cache that is over the limit (left by an earlier, larger run) under it."""
        with self.table.locked():
            self._make_room(0, -1, trimming=True)

    def recover_if_orphaned(self, shard: int) -> None:
        """Reset a shard whose preparer died mid-way (its slot's process is gone).

        Args:
            shard: a shard seen preparing.
        """
        table = self.table
        owner = int(table.owner[shard]) - 1
        if owner < 0 or table.slot_alive(owner):
            return
        with table.locked():
            if table.state[shard] == tb.PREPARING and not table.slot_alive(owner):
                log.debug("cache: recovering %s from a dead preparer", self.files.describe(shard))
                self.files.recover(table, shard)

    def forget(self, shard: int, seen: tuple[int, int, int] | None) -> None:
        """A present shard's file (`seen`: its identity when it was found unusable) vanished,
        changed size or fails its digest underneath us (a clean-up script, another job, a full
        disk): mark it absent, so it is prepared again. Not if another reader replaced it since.

        Args:
            shard: the shard whose file is gone or damaged.
            seen: `disk.identity` of its raw file when the reader found it unusable.
        """
        table = self.table
        preparer = self.files.preparer
        with table.locked():
            if table.state[shard] != tb.PRESENT or disk.identity(preparer.raw_path(shard)) != seen:
                return
            log.warning("cache: %s is missing, truncated or corrupt on disk; fetching it again",
                        self.files.describe(shard))
            preparer.remove_files(shard)
            table.disk[shard] = 0
            table.state[shard] = tb.ABSENT
        preparer.forget(shard)

    def explain_wait(self, shard: int) -> str:
        """Why a reader may still be waiting for `shard`: its state, or what room it needs."""
        table = self.table
        state = tb.STATE_NAMES[int(table.state[shard])]
        if state != "absent" or self.node_limit is None:
            return f"state {state}"
        pinned = int(table.disk[table.pinned(table.live_slots(recent=True))].sum())
        return (f"waiting for room: it needs {self.footprint.download_cost(shard)} bytes, "
                f"cache_limit {self.node_limit}, in use {table.used()}, pinned by readers {pinned}")

    def drift_steps(self, node_ids: np.ndarray, shard_starts: np.ndarray,
                    unit: int = 1) -> int | None:
        """Steps a reader may lead the slowest reader of its job under the node's limit
        (`drift_bound.drift_batches`, in steps); None without a limit.

        Args:
            node_ids: the node plan's sample ids [ranks, workers, n].
            shard_starts: the first sample id of each shard.
            unit: samples a reader reads at a step (the plan's batch size).
        """
        if self.node_limit is None:
            return None
        return max(int(unit), 1) * drift_batches(node_ids, self.footprint, shard_starts, unit,
                                                 self.node_limit, self.table.other_bytes)

    def check_plan(self, node_ids: np.ndarray, shard_starts: np.ndarray,
                   unit: int = 1) -> MinimumLimit | None:
        """Refuse (CacheLimitError with the number) a cache_limit the node plan cannot run in;
        the smallest workable limit, or None without a limit.

        Args:
            node_ids: the node plan's sample ids [ranks, workers, n].
            shard_starts: the first sample id of each shard.
            unit: samples a reader reads at a step (the plan's batch size).
        """
        limit = self.node_limit
        if limit is None:
            return None
        needed = minimum_limit(node_ids, self.footprint, shard_starts, unit)
        check_limit(limit, needed, other_bytes=self.table.other_bytes,
                    where=", ".join(self.files.dirs))
        return needed
