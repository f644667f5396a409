"""What a node's cache will do over a run, before it runs: its readers' shard sequences, the shard
footprints and the cache_limit in; downloads, bytes, evictions and occupancy out. Pure numpy.

The model is the engine's: each reader prefetches the window `lookahead.prefetch_window` gives,
and room is made with `evict.choose_victims` over the distances `evict.next_use` computes from
the horizons `lookahead.horizon_runs` announces (the engine's own functions). The prefetchers of
a node's readers run side by side, so at each step their shards are brought nearest use first
across all readers (one reader's far shard does not take the room another's near shard needs),
and a shard is only brought while it fits beside every shard needed sooner (`evict.worth_bringing`).
What it leaves out: readers advance in lock-step, one sample per step each, and a download
completes before the next step, so there are no races between prefetchers and no reader waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from streaming.cache.policy.eviction import choose_victims, next_use, worth_bringing
from streaming.cache.policy.lookahead import ReaderRuns, horizon_runs
from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.policy.simulated_windows import NodeWindows
from streaming.errors import CacheLimitError

HORIZON = 64  # shards a reader announces (the node table's horizon)
AHEAD = 4  # new shards a prefetcher reaches beyond its window (the engine's prefetch threads)


@dataclass(frozen=True)
class SimulatedEpoch:
    """One node's cache over one epoch.

    Args:
        downloads: shards fetched; bytes_downloaded: bytes over the network for them.
        evictions: shards removed to stay under the limit.
        peak_cache_bytes: most bytes held or reserved at once.
        fetched: ids of the shards fetched (sorted, each once).
        occupancy: [k, 2] (reader step, cache bytes) after each change.
        steps: the epoch's length in reader steps (its longest reader's samples).
    """

    downloads: int
    bytes_downloaded: int
    evictions: int
    peak_cache_bytes: int
    fetched: np.ndarray
    occupancy: np.ndarray
    steps: int


@dataclass
class SimulatedCache:
    """The simulated cache of one node, carried from epoch to epoch.

    Args:
        footprint: bytes per shard while cached and while being prepared.
        fetch_bytes: bytes a download of each shard moves.
        limit: the node's cache_limit in bytes (None: no limit).
        predownload: samples each reader prepares ahead.
        other_bytes: bytes of the other files in the cache folders (index.json, bookkeeping),
            held throughout and counted against the limit, as the engine counts them.
    """

    footprint: Footprint
    fetch_bytes: np.ndarray
    limit: int | None
    predownload: int
    other_bytes: int = 0
    present: np.ndarray = field(init=False)
    cached: np.ndarray = field(init=False)
    disk: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.present = np.zeros(len(self.footprint.resident), bool)
        self.disk = np.zeros(len(self.footprint.resident), np.int64)
        self.cached = self.footprint.resident > 0

    def held(self) -> int:
        """Bytes the cache folders hold: the present shards and the other files."""
        return int(self.disk.sum()) + int(self.other_bytes)

    def wipe(self) -> None:
        """Fresh local disks (a restart on new machines)."""
        self.present[:] = False
        self.disk[:] = 0

    def run_epoch(self, sequences: Sequence[np.ndarray]) -> SimulatedEpoch:
        """Simulate readers reading `sequences` (one shard id per step each) from here."""
        if self._fits(sequences):
            return self._without_eviction(sequences)
        return _Epoch(self, [ReaderRuns.of(s, self.predownload) for s in sequences]).run()

    def _fits(self, sequences: Sequence[np.ndarray]) -> bool:
        """Whether every shard the node holds and will read fits under the limit at once (no
        eviction can happen)."""
        if self.limit is None:
            return True
        wanted = self.present.copy()
        for seq in sequences:
            wanted[np.asarray(seq, np.int64)] = True
        wanted &= self.cached
        fp = self.footprint
        worst = int(fp.transient[wanted].max(initial=0))
        return int(fp.resident[wanted].sum()) + worst + int(self.other_bytes) <= self.limit

    def _without_eviction(self, sequences: Sequence[np.ndarray]) -> SimulatedEpoch:
        """The epoch when nothing is evicted: each absent shard is fetched once, when the
        first reader's prefetch window reaches it (`predownload` steps before its first use)."""
        first = np.full(len(self.present), np.iinfo(np.int64).max, np.int64)
        at = np.arange(max((len(s) for s in sequences), default=0), dtype=np.int64)
        for seq in sequences:
            np.minimum.at(first, np.asarray(seq, np.int64), at[:len(seq)])
        new = np.flatnonzero((first < np.iinfo(np.int64).max) & ~self.present & self.cached)
        new = new[np.argsort(first[new], kind="stable")]
        before = self.held()
        resident = self.footprint.resident[new]
        held = before + np.cumsum(resident)
        peak = before if not len(new) else int(
            (held - resident + self.footprint.transient[new] + resident).max())
        self.present[new] = True
        self.disk[new] = resident
        steps = np.maximum(first[new] - self.predownload, 0)
        trace = np.concatenate([[[0, before]], np.stack([steps, held], axis=1)]) if len(new) \
            else np.array([[0, before]], np.int64)
        return SimulatedEpoch(len(new), int(self.fetch_bytes[new].sum()), 0, max(peak, before),
                          np.sort(new), trace.astype(np.int64),
                          max((len(s) for s in sequences), default=0))


class _Epoch:
    """One epoch's pass of a node's readers over a `SimulatedCache`."""

    def __init__(self, cache: SimulatedCache, readers: list[ReaderRuns]) -> None:
        self.cache, self.readers = cache, readers
        self.downloads = self.bytes = self.evictions = 0
        self.peak = cache.held()
        self.fetched: list[int] = []
        self.trace: list[tuple[int, int]] = [(0, self.peak)]
        self.step = 0
        self.current = np.full(len(readers), -1, np.int64)
        self.horizons = _Horizons.empty(len(readers))
        self.windows = NodeWindows(readers, cache.predownload, AHEAD)
        self._distance_step = -1  # the step `_distance_now` was computed at
        self._distance_now = np.zeros(0, np.int64)

    def run(self) -> SimulatedEpoch:
        pre = self.cache.predownload
        ticks = np.unique(np.concatenate(
            [np.zeros(1, np.int64)] + [np.maximum(r.start - pre, 0) for r in self.readers]
            + [r.start for r in self.readers]))
        windows = self.windows
        for t in windows.walk(ticks):
            self.step = t
            self.current = windows.current()
            reading = self.current[self.current >= 0]
            absent = ~self.cache.present[reading] & self.cache.cached[reading]
            for shard in reading[absent].tolist():
                if not self._bring(shard, -1):
                    raise CacheLimitError(
                        f"the simulated cache cannot hold shard {shard} beside the shards the "
                        f"readers use at step {t}: cache_limit={self.cache.limit} is too small")
            self._prefetch(t, windows)
        fetched = np.unique(np.asarray(self.fetched, np.int64))
        return SimulatedEpoch(self.downloads, self.bytes, self.evictions, self.peak, fetched,
                          np.asarray(self.trace, np.int64).reshape(-1, 2),
                          max((r.length for r in self.readers), default=0))

    def _prefetch(self, t: int, windows: NodeWindows) -> None:
        """The readers' prefetches at step `t`, nearest use first across all of them (the
        prefetchers of a node's readers run side by side); a reader whose prefetch finds no
        room tries no farther one until the next step."""
        wanted = ~self.cache.present & self.cache.cached
        # Until a download changes the cache, each reader tries only its nearest shard (a
        # refusal blocks it), so a step where every reader is refused needs no more than those.
        nearest = windows.nearest(t, wanted)
        if nearest is None or self._try(*nearest, stop_at_download=True):
            self._try(*windows.candidates(t, wanted), stop_at_download=False)

    def _try(self, shard: np.ndarray, distance: np.ndarray, owner: np.ndarray, *,
             stop_at_download: bool) -> bool:
        """Bring the candidate shards nearest first, each reader until its first refusal;
        True if it stopped at a download (`stop_at_download`: nothing brought, nothing
        evicted)."""
        order = np.argsort(distance, kind="stable")
        blocked = [False] * len(self.readers)
        # A shard refused at some distance is refused at any farther one until a download
        # changes the cache (the shards needed sooner only grow, the evictable ones shrink).
        refused: set[int] = set()
        for s, d, o in zip(shard[order].tolist(), distance[order].tolist(),
                           owner[order].tolist()):
            if blocked[o]:
                continue
            if s in refused or (stop_at_download and self._room_for(s, d) is None):
                refused.add(s)
                blocked[o] = True
                continue
            if stop_at_download:
                return True
            before = self.downloads
            if not self._bring(s, d):
                refused.add(s)
                blocked[o] = True
            elif self.downloads != before:
                refused.clear()
        return False

    def _bring(self, shard: int, farther_than: int) -> bool:
        """Make `shard` present (False: no room without evicting what is needed sooner)."""
        cache = self.cache
        if cache.present[shard] or not cache.cached[shard]:
            return True
        victims = self._room_for(shard, farther_than)
        if victims is None:
            return False
        if len(victims):
            cache.present[victims] = False
            cache.disk[victims] = 0
            self.evictions += len(victims)
        used = cache.held()
        cost = cache.footprint.download_cost(shard)
        self.peak = max(self.peak, used + cost)
        cache.present[shard] = True
        cache.disk[shard] = cache.footprint.resident[shard]
        self.downloads += 1
        self.bytes += int(cache.fetch_bytes[shard])
        self.fetched.append(shard)
        self.trace.append((self.step, used + int(cache.footprint.resident[shard])))
        return True

    def _room_for(self, shard: int, farther_than: int) -> np.ndarray | None:
        """The shards to evict to bring absent `shard` now (None: it may not come yet, or no
        room can be made without evicting what is needed sooner). Changes nothing."""
        cache = self.cache
        cost = cache.footprint.download_cost(shard)
        if farther_than > 0 and cache.limit is not None and not worth_bringing(
                shard, farther_than, cost, distance=self._distance(),
                sizes=cache.footprint.resident, wanted=cache.cached,
                room=cache.limit - cache.other_bytes):
            return None
        used = cache.held()
        if cache.limit is None or used + cost <= cache.limit:
            return np.zeros(0, np.int64)
        return choose_victims(cost, cache.limit - used, sizes=cache.disk,
                              evictable=self._evictable(), distance=self._distance(),
                              farther_than=farther_than)

    def _evictable(self) -> np.ndarray:
        out = self.cache.present & self.cache.cached
        out[self.current[self.current >= 0]] = False  # a reader holds its current shard
        return out

    def _distance(self) -> np.ndarray:
        """Each shard's next use as the readers' announced horizons say (evict.next_use); the
        horizons only move with the step, so it is computed once per step."""
        if self._distance_step != self.step:
            h = self.horizons
            w = self.windows
            h.announce(self.readers, np.where(w.active, w.lo, -1))
            progress = np.full(len(self.readers), self.step, np.int64)
            self._distance_now = next_use(h.shards, h.starts, h.ends, progress,
                                          len(self.cache.present))
            self._distance_step = self.step
        return self._distance_now


@dataclass
class _Horizons:
    """What each simulated reader has announced, as the engine's node-table rows hold it.

    Args:
        shards: [readers, HORIZON] its next distinct shards (-1: none).
        starts: the step at which it starts reading each.
        ends: the step after its run of each ends.
        run: the run each reader announced at (-1: finished, -2: not yet).
    """

    shards: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    run: np.ndarray

    @classmethod
    def empty(cls, readers: int) -> _Horizons:
        """Nothing announced yet by `readers` readers."""
        grid = (readers, HORIZON)
        return cls(np.full(grid, -1, np.int64), np.zeros(grid, np.int64),
                   np.zeros(grid, np.int64), np.full(readers, -2, np.int64))

    def announce(self, readers: Sequence[ReaderRuns], runs: np.ndarray) -> None:
        """The horizons with each reader at run `runs[i]` (-1: done): a reader announces again
        only when its current run has changed (lookahead.horizon_runs, as the engine publishes
        them)."""
        runs = np.asarray(runs, np.int64)
        moved = np.flatnonzero(runs != self.run)
        for i, r0 in zip(moved.tolist(), runs[moved].tolist()):
            r = readers[i]
            self.run[i] = r0
            self.shards[i] = -1
            if r0 < 0:
                continue
            runs_ahead = horizon_runs(r.shard, r.entries, r.previous, r0, HORIZON, AHEAD)
            self.shards[i, :len(runs_ahead)] = r.shard[runs_ahead]
            self.starts[i, :len(runs_ahead)] = r.start[runs_ahead]
            self.ends[i, :len(runs_ahead)] = r.end[runs_ahead]
