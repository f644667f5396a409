"""The space side of the cache engine: prepare a shard only when room can be made for it under the
node's cache_limit and on its disk, evict (Belady: the shard next needed farthest away) to make
that room, adopt what an earlier run left on disk, and recover shards whose preparer died.

Every state change happens under the node table's lock; a reader's pins are its own slot's row.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import threading
from pathlib import Path

import numpy as np

from streaming.cache import disk
from streaming.cache import table as tb
from streaming.cache.evict import choose_victims, next_use
from streaming.cache.limit import Footprint, MinimumLimit, check_limit, minimum_limit
from streaming.cache.prepare import ShardPreparer
from streaming.errors import CacheLimitError, CacheSpaceError
from streaming.util.confine import remove

log = logging.getLogger("streaming.cache.engine")


class Brought(enum.Enum):
    """What `CacheRoom._bring` did with an absent shard."""

    READY = "ready"  # it is present now
    BUSY = "busy"  # another reader is preparing it
    WAIT = "wait"  # the node is at its download or space limit: try again later


READY, BUSY, WAIT = Brought.READY, Brought.BUSY, Brought.WAIT


class CacheRoom:
    """Preparation under the limit, eviction and disk accounting of a `CacheEngine` (its base
    class): what the engine's readers and prefetchers call to bring a shard in."""

    preparer: ShardPreparer
    footprint: Footprint
    cached: np.ndarray  # shards this cache holds (the others are local-only data)
    dirs: list[str]
    _slot: int
    _mutex: threading.Lock

    @property
    def table(self) -> tb.CacheTable:
        raise NotImplementedError  # the engine attaches the node table

    def effective_limit(self) -> int | None:
        """The node's limit: the smallest any process sharing these folders asked for."""
        return self.table.node_limit

    def _scan(self, table: tb.CacheTable) -> None:
        """First process on the node: adopt complete shards on disk, drop orphans, and count
        every other file in the folders against the limit."""
        facts = self.preparer.facts
        by_folder: dict[Path, list[int]] = {}
        for shard in np.flatnonzero(self.cached).tolist():  # part folders: `0/shard...` etc.
            by_folder.setdefault(self.preparer.raw_path(shard).parent, []).append(shard)
        for folder, shards in by_folder.items():
            files = disk.listing(folder)
            leaf = {s: (Path(facts.basenames[s]).name,
                        Path(facts.zip_basenames[s]).name if facts.zip_basenames[s] else None)
                    for s in shards}
            root = self.preparer.root(shards[0])
            for name in disk.sweep_orphans(root, folder, files, dict(leaf.values())):
                files.pop(name, None)
            for shard in shards:
                raw_name, zip_name = leaf[shard]
                raw = files.get(raw_name, (-1, 0.0))[0]
                if raw == int(facts.raw_bytes[shard]):
                    table.state[shard] = tb.PRESENT
                    table.disk[shard] = raw + (files.get(zip_name, (0, 0.0))[0] if zip_name
                                               else 0)
                elif zip_name and zip_name in files:
                    remove(root, folder / zip_name)
        table.other_bytes = max(disk.folder_bytes(self.dirs) - int(table.disk.sum()), 0)

    def _bring(self, shard: int, farther_than: int) -> Brought:
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
        fetched = disk.size(raw) != int(self.preparer.facts.raw_bytes[shard])
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
            facts = self.preparer.facts
            self._count(tb.DOWNLOADS)
            self._count(tb.BYTES, int(facts.zip_bytes[shard] or facts.raw_bytes[shard]))
            if log.isEnabledFor(logging.DEBUG):
                log.debug("cache: prepared %s", self._name(shard))
        return READY

    def _check_space(self, shard: int, cost: int, farther_than: int) -> bool:
        """Whether the disk has `cost` free bytes for `shard` beside what the preparations in
        flight have reserved and not yet written (caller holds the lock). Under a cache_limit,
        shards are evicted to free what is missing. False (wait) means the shards that could
        go are still needed sooner or pinned, or preparations in flight may still settle;
        CacheSpaceError when nothing is in flight and even evicting every cached shard (or,
        without a limit, anything) would not make room."""
        table = self.table
        folder = self.preparer.raw_path(shard).parent
        if disk.free_bytes(folder) - int(table.reserved.sum()) >= cost:
            return True  # room even if nothing in flight had written a byte yet
        pending = self._unwritten()
        free = disk.free_bytes(folder) - pending
        if free >= cost:
            return True
        limit = self.effective_limit()
        if limit is not None:
            if self._make_room(limit - table.used() + (cost - free), farther_than):
                free = disk.free_bytes(folder) - pending
                if free >= cost:
                    return True
            if int(table.disk[self.cached].sum()) >= cost - free:
                return False
        if pending:
            return False
        raise self._space_error(shard, cost, free)

    def _unwritten(self) -> int:
        """Bytes the preparations in flight reserved and have not written yet (their temp
        files hold the rest, which the disk's free space already shows)."""
        table = self.table
        busy = np.flatnonzero(table.reserved > 0)
        written = sum(disk.temp_bytes(*self._paths(int(k))) for k in busy.tolist())
        return max(int(table.reserved[busy].sum()) - written, 0)

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
        owner = np.asarray(self.preparer.facts.stream_of_shard, np.int64)
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
        self.preparer.remove_files(shard)
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
        disk.remove_leftovers(self.preparer.root(shard), filter(None, self._paths(shard)),
                              stale_only=False)

    # ----- limits -----------------------------------------------------------------------
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

    def _count(self, column: int, amount: int = 1) -> None:
        with self._mutex:
            self.table.count(self._slot, column, amount)

    # ----- helpers -----------------------------------------------------------------------
    def _paths(self, shard: int) -> tuple[Path, Path | None]:
        return self.preparer.raw_path(shard), self.preparer.zip_path(shard)

    def _name(self, shard: int) -> str:
        facts = self.preparer.facts
        stream = self.preparer.streams[int(facts.stream_of_shard[shard])]
        name = facts.zip_basenames[shard] or facts.basenames[shard]
        where = stream.remote_dir or stream.local_dir
        return f"shard {shard} ({str(where).rstrip('/')}/{name})"
