"""The node's cache table (`CacheTable`, the live state of the cache; a shard's fixed facts are the
`ShardFacts` of `cache.facts`): one int64 shared-memory segment that every process using the
same cache folders maps, guarded by one coord FileLock for state changes.

Layout: globals, then five per-shard columns (state, owner reader + 1, bytes on disk, bytes
reserved for an in-flight preparation, failed attempts), then one row per reader slot (process
identity, counters, pinned shards, and two buffers for its horizon: the reader's step, the next
shards it will need and the steps at which it starts and stops reading each; `cache.horizon`
publishes and reads them). A slot row is written only by the reader owning it, so pins and
horizons cost no lock; everything else changes under the lock, including the one word of a row
any process writes: when it last saw the row's holder running (`live_slots`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from streaming.cache.table.cache_stats import COUNTERS, CacheStats
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.proc import ProcessId
from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.coord.shm_files import shm_dir
from streaming.errors import CoordinationError

ABSENT, PREPARING, PRESENT, EVICTING = 0, 1, 2, 3
STATE_NAMES = ("absent", "preparing", "present", "evicting")

LOCK_TIMEOUT = 30.0  # the lock is only ever held for bookkeeping and unlinks
SEEN_ALIVE_NS = 500_000_000  # a holder seen running this recently counts as running (live_slots)
MAGIC = 0x53444343_00000006  # "SDCC" v6
_GLOBALS = 9  # magic, shards, slots, pins, horizon, then the four words below
# global words written after creation; WARNED holds one bit per warning given on the node
OTHER_BYTES, NODE_LIMIT, NODE_DOWNLOADS, WARNED = 5, 6, 7, 8
THRASHING = 1  # the WARNED bit of the warning that evictions remove shards still needed
_COLUMNS = 5  # state, owner, disk, reserved, fails
# pid, start, pidns, horizon version, the slot's cache_limit and max_downloads, when a
# process last saw the holder running (CLOCK_MONOTONIC ns), and the reader's pass: its job (a
# hash of the dataset's job namespace, 0: none) and the pass (epoch + 1, 0: not reading), whose
# step is its horizon's (`ReaderSlot.enter_pass`, `policy.drift_bound`)
_IDENTITY = 9
VERSION, ASKED_LIMIT, ASKED_DOWNLOADS, SEEN_ALIVE, JOB, PASS = 3, 4, 5, 6, 7, 8
# Slot columns of the counters, in COUNTERS order.
HITS, MISSES, DOWNLOADS, BYTES, EVICTIONS, WAIT, NEEDED_EVICTIONS = (
    _IDENTITY + i for i in range(len(COUNTERS)))


class CacheTable:
    """Shared per-shard state and reader slots for one set of cache folders on one node."""

    def __init__(self, segment: SharedArray, lock: FileLock, *, created: bool) -> None:
        self.segment = segment
        self.lock = lock
        self._threads = threading.Lock()  # one FileLock object serves all threads of a process
        self.created = created
        arr = segment.array
        g = arr[:_GLOBALS]
        if int(g[0]) != MAGIC:
            raise CoordinationError(f"shared cache table {segment.path} has a foreign layout")
        self.num_shards, self.num_slots, self.num_pins, self.horizon = (int(v) for v in g[1:5])
        self._globals = g
        n = self.num_shards
        cols = arr[_GLOBALS:_GLOBALS + _COLUMNS * n].reshape(_COLUMNS, n)
        self.state, self.owner, self.disk, self.reserved, self.fails = cols
        width = _IDENTITY + len(COUNTERS) + self.num_pins + 2 * _buffer(self.horizon)
        self.slots = arr[_GLOBALS + _COLUMNS * n:].reshape(self.num_slots, width)
        c = _IDENTITY + len(COUNTERS)
        self.counters = self.slots[:, _IDENTITY:c]
        self.pins = self.slots[:, c:c + self.num_pins]
        self.horizon_versions = self.slots[:, VERSION]
        # [slot, buffer, word]: the reader's step, then its horizon's shards, starts and ends
        self.horizon_buffers = self.slots[:, c + self.num_pins:].reshape(
            self.num_slots, 2, _buffer(self.horizon))

    @staticmethod
    def size(num_shards: int, slots: int, pins: int, horizon: int) -> int:
        """Number of int64 words the table occupies."""
        return (_GLOBALS + _COLUMNS * num_shards
                + slots * (_IDENTITY + len(COUNTERS) + pins + 2 * _buffer(horizon)))

    @classmethod
    def open(cls, token: str, num_shards: int, *, slots: int = 256, pins: int = 4,
             horizon: int = 64, init: Callable[[CacheTable], None] | None = None) -> CacheTable:
        """Attach the node's table named by `token`, or create it (then `init` fills it). It
        lives while any process maps it: the last to close it removes it."""
        ns = Namespace(token)
        lock = FileLock(shm_dir() / ns.name("cache.lock"), timeout=LOCK_TIMEOUT)
        name = ns.name("cache")
        with lock:
            try:
                seg = SharedArray.attach(name, writable=True, held=True)
                table = cls(seg, lock, created=False)
                if (table.num_shards, table.num_slots) != (num_shards, slots):
                    raise CoordinationError(
                        f"shared cache table {seg.path} describes {table.num_shards} shards / "
                        f"{table.num_slots} slots, expected {num_shards} / {slots}")
                return table
            except SegmentMissingError:
                pass
            seg = SharedArray.create(name, cls.size(num_shards, slots, pins, horizon), np.int64,
                                     held=True)
            seg.array[:5] = (MAGIC, num_shards, slots, pins, horizon)
            table = cls(seg, lock, created=True)
            table.pins[:] = -1
            table.horizon_buffers[:, :, 1:1 + horizon] = -1
            if init is not None:
                init(table)
            return table

    # ----- globals -----------------------------------------------------------------------
    @property
    def other_bytes(self) -> int:
        """Bytes of files in the cache folders that are not cached shards (index.json, ...)."""
        return int(self._globals[OTHER_BYTES])

    @other_bytes.setter
    def other_bytes(self, value: int) -> None:
        self._globals[OTHER_BYTES] = value

    @property
    def node_limit(self) -> int | None:
        """The node's cache_limit: the smallest one a live reader asked for (None: no limit)."""
        value = int(self._globals[NODE_LIMIT])
        return value if value > 0 else None

    @property
    def node_downloads(self) -> int | None:
        """Preparations the node runs at once: the fewest a live reader asked for (None: any)."""
        value = int(self._globals[NODE_DOWNLOADS])
        return value if value > 0 else None

    def warning_given(self, bit: int) -> bool:
        """Whether a process of the node already gave the warning `bit` (a WARNED bit).

        Args:
            bit: the warning's bit, e.g. THRASHING.
        """
        return bool(int(self._globals[WARNED]) & bit)

    def mark_warning_given(self, bit: int) -> None:
        """Record that the warning `bit` was given, so no other process of the node gives it
        (caller holds the lock).

        Args:
            bit: the warning's bit, e.g. THRASHING.
        """
        self._globals[WARNED] = int(self._globals[WARNED]) | bit

    def node_stats(self) -> CacheStats:
        """The counters of every reader slot of the node, summed."""
        return CacheStats.from_counters(self.counters)

    def used(self) -> int:
        """Bytes the cache folders hold or have promised to in-flight preparations."""
        return self.other_bytes + int(self.disk.sum()) + int(self.reserved.sum())

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the table lock (all state changes happen under it)."""
        with self._threads, self.lock:
            yield

    # ----- reader slots ------------------------------------------------------------------
    def slot_alive(self, slot: int) -> bool:
        holder = ProcessId(*(int(v) for v in self.slots[slot, :3]))
        # This process's own slots need no look at /proc.
        return holder.pid != 0 and (holder == ProcessId.current() or holder.alive())

    def live_slots(self, *, recent: bool = False) -> np.ndarray:
        """Mask of slots held by running processes.

        Looking costs tens of microseconds per holder (a signal and a read of /proc), and
        eviction and prefetch decisions ask many times a second under the lock. With `recent`,
        a holder that any process of the node saw running less than `SEEN_ALIVE_NS` ago counts
        as running without a new look. One that died that recently keeps its pins and horizon
        a moment longer; nothing is reclaimed on such an answer (`claim_slot` and the checks
        of a shard's preparer always look).

        Args:
            recent: trust a look any process of the node took within `SEEN_ALIVE_NS`.
        """
        held = self.slots[:, 0] != 0
        now = time.monotonic_ns()
        age = now - self.slots[:, SEEN_ALIVE]
        alive = held & (age >= 0) & (age < SEEN_ALIVE_NS) if recent else np.zeros_like(held)
        for slot in np.flatnonzero(held & ~alive).tolist():
            if self.slot_alive(slot):
                alive[slot] = True
                self.slots[slot, SEEN_ALIVE] = now
        return alive

    def claim_slot(self, on_dead_owner: Callable[[int], None]) -> int:
        """Take a free (or dead process's) slot for this reader; call `on_dead_owner(shard)`
        for shards a dead holder left mid-preparation. Caller holds the lock."""
        me = ProcessId.current()
        for slot in range(self.num_slots):
            if self.slots[slot, 0] != 0 and self.slot_alive(slot):
                continue
            for shard in np.flatnonzero((self.owner == slot + 1) & (self.state == PREPARING)):
                on_dead_owner(int(shard))
            self.slots[slot, :_IDENTITY] = (me.pid, me.start, me.pidns, 0, 0, 0,
                                            time.monotonic_ns(), 0, 0)
            self.pins[slot] = -1
            self._clear_horizon(slot)
            return slot
        raise CoordinationError(
            f"all {self.num_slots} reader slots of the shared cache table {self.segment.path} "
            "are held by running processes")

    def free_slot(self, slot: int) -> None:
        """Give the slot back (its counters stay, so node totals keep counting); its limits
        stop counting (caller holds the lock)."""
        self.pins[slot] = -1
        self._clear_horizon(slot)
        self.slots[slot, :3] = 0
        self.slots[slot, SEEN_ALIVE] = 0
        self.slots[slot, ASKED_LIMIT:ASKED_DOWNLOADS + 1] = 0
        self.slots[slot, JOB:PASS + 1] = 0
        self._settle_asks()

    def _clear_horizon(self, slot: int) -> None:
        """No known shard in either of the slot's horizon buffers (caller holds the lock)."""
        self.horizon_buffers[slot, :, 0] = 0
        self.horizon_buffers[slot, :, 1:1 + self.horizon] = -1

    def ask(self, slot: int, limit: int, downloads: int) -> None:
        """Record the cache_limit and download concurrency the slot's reader asked for (0: no
        wish); the node's values are the smallest that live readers ask for (caller holds the
        lock). A reader that leaves (or dies) takes its wish with it."""
        self.slots[slot, ASKED_LIMIT:ASKED_DOWNLOADS + 1] = (limit, downloads)
        self._settle_asks()

    def _settle_asks(self) -> None:
        alive = self.live_slots()
        for word, asked in ((NODE_LIMIT, ASKED_LIMIT), (NODE_DOWNLOADS, ASKED_DOWNLOADS)):
            values = self.slots[alive, asked]
            wished = values[values > 0]
            self._globals[word] = int(wished.min()) if len(wished) else 0

    def pinned(self, alive: np.ndarray | None = None) -> np.ndarray:
        """Mask of shards pinned by a live reader."""
        rows = self.pins if alive is None else self.pins[alive]
        mask = np.zeros(self.num_shards + 1, bool)
        mask[rows.reshape(-1)] = True  # -1 lands on the spare last element
        return mask[:-1]

    def count(self, slot: int, column: int, amount: int = 1) -> None:
        """Add to one of the slot's counters (only the slot's owner writes its row)."""
        self.slots[slot, column] += amount

    def removed(self) -> bool:
        """Whether the node no longer holds this table: the last reader closed it and no
        other process mapped it, so it was removed (a process that mapped it just before must
        map the node's table again; see `ReaderSlot.join`)."""
        return not self.segment.linked()

    def close(self) -> None:
        self.segment.close()


def _buffer(horizon: int) -> int:
    """Words in one horizon buffer: the reader's step, then shards, starts and ends."""
    return 1 + 3 * horizon
