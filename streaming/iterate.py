"""The worker side of an epoch: fetch this worker's slice of the node plan, prepare shards ahead
of use in background threads, and read rows in plan order, many at a time (positional reads by a
reader thread, one vectorised decode per read)."""

from __future__ import annotations

import errno
import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from streaming.coord.files import shm_dir
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.format.shard import NOWAIT_READS
from streaming.shelf import NotOpen, Shelf, decode
from streaming.shelf import fetch as fetch_chunk

PLAN_LOCK_TIMEOUT = 300.0  # seconds a peer may spend computing the node plan


class PlanBoard:
    """Node plans published in shared memory: the first local process to ask for an epoch's
    plan computes and publishes it; the others attach and copy their slice.

    The publisher keeps its latest segments alive; if it is gone before a late peer arrives,
    that peer recomputes (the plan is a pure function, so the result is the same).
    """

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self._owned: list[SharedArray] = []

    def __getstate__(self) -> dict:
        return {"namespace": self.namespace, "_owned": []}

    def slice(self, key: str, compute: Callable[[], np.ndarray], rank: int, worker: int,
              *, keep: int = 2) -> np.ndarray:
        """Worker (rank, worker)'s row of the node plan `key`, computed once per node."""
        digest = hashlib.blake2b(key.encode(), digest_size=6).hexdigest()
        name = self.namespace.name("p" + digest)
        lock = FileLock(shm_dir() / self.namespace.name("l" + digest), timeout=PLAN_LOCK_TIMEOUT)
        with lock:
            try:
                seg = SharedArray.attach(name)
            except SegmentMissingError:
                ids = compute()
                seg = SharedArray.create(name, ids.shape, np.int64, fill=None)
                seg.array[...] = ids
                self._owned.append(seg)
                while len(self._owned) > keep:
                    self._owned.pop(0).close()
                return np.array(ids[rank, worker])
        try:
            return np.array(seg.array[rank, worker])
        finally:
            seg.close()

    def close(self) -> None:
        while self._owned:
            self._owned.pop().close()


PREPARE_THREADS = 4  # shards prepared at once (decompression and downloads release the GIL)


class Prefetcher:
    """Prepares the shards of an ordered id slice ahead of the reader, `ahead` samples ahead,
    with up to PREPARE_THREADS threads (a shuffled epoch's first batch can need every shard).

    An exception here is stored and re-raised by `check()` in the iterating thread.
    """

    def __init__(self, prepare: Callable[[int], Any], shards: np.ndarray, ahead: int,
                 threads: int = PREPARE_THREADS) -> None:
        self._prepare = prepare
        self._shards, self._first_use = _first_uses(shards)
        self._ahead = max(int(ahead), 1)
        self._position = 0
        self._next = 0
        self._wake = threading.Condition()
        self._stop = False
        self.error: BaseException | None = None
        count = max(1, min(threads, len(self._shards)))
        self._threads = [threading.Thread(target=self._run, daemon=True,
                                          name=f"streaming-prefetch-{k}") for k in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def advance(self, position: int) -> None:
        """Tell the threads how far the reader has got (wakes them when they were waiting)."""
        self._position = position
        with self._wake:
            self._wake.notify_all()

    def _run(self) -> None:
        try:
            while True:
                with self._wake:
                    while (not self._stop and self._next < len(self._shards)
                           and self._first_use[self._next] - self._position > self._ahead):
                        self._wake.wait(0.5)
                    if self._stop or self._next >= len(self._shards):
                        return
                    shard = self._shards[self._next]
                    self._next += 1
                self._prepare(shard)
        except BaseException as exc:  # surfaced in the reader by check()
            self.error = exc

    def check(self) -> None:
        """Re-raise a preparing thread's error as it is: the root cause's type and message."""
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stop = True
        with self._wake:
            self._wake.notify_all()


def _first_uses(shards: np.ndarray) -> tuple[list[int], list[int]]:
    """The distinct shards in order of first use, and where each is first used (an O(n)
    scatter-min instead of sorting the whole slice)."""
    if not len(shards):
        return [], []
    first = np.full(int(shards.max()) + 1, len(shards), np.int64)
    np.minimum.at(first, shards, np.arange(len(shards)))
    used = np.flatnonzero(first < len(shards))
    order = np.argsort(first[used], kind="stable")
    return used[order].tolist(), first[used][order].tolist()


READ_BYTES = 16 << 20  # sample bytes decoded per vectorised read (bounds the copies held)
MAX_READ = 1024  # rows per read: enough that a shuffled read still has many rows per shard


def iter_chunks(
    ids: np.ndarray,
    locate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    open_shard: Callable[[int], Any],
    prepare: Callable[[int], Any],
    ahead: int,
    item: Callable[[int], Any] | None = None,
    *,
    chunk: int = MAX_READ,
    first: int = 64,
    columns: bool = False,
    views: bool = False,
    cache: Any = None,
    open_file: Callable[[int, Path], Any] | None = None,
) -> Iterator[list[Any]]:
    """Yield the decoded rows of planned ids (skipping -1 padding) `chunk` at a time (the
    first chunk only `first`, for a quick first batch), preparing shards ahead in threads.

    A chunk is a list of samples, or with `columns` a list of per-column value lists (one
    batch, no per-sample dicts; with `views` too, `bytes` values are memoryviews of the
    chunk's buffer, for a consumer that copies them at once). The rows of chunk k + 1 are
    copied out of their shards by a reader thread (positional reads release the GIL) while
    chunk k is decoded here, then a chunk is decoded in one vectorised pass. `item(i)`, when
    given, replaces the direct read (a user's `__getitem__` override; samples only).

    With a `cache` (CacheEngine), it prefetches instead of a Prefetcher; with `open_file` too
    and a cache_limit in force, shards it caches are read under a pin, one at a time, through
    a descriptor closed after each read (`open_file(shard, path)` validates a shard once per
    pass), since an open file of an evicted shard would keep its blocks (see `shelf`). Other
    shards stay open (`open_shard`).
    """
    ids = ids[ids >= 0]
    if not len(ids):
        return
    shards, rows = locate(ids)
    if cache is None:
        prefetch: Any = Prefetcher(prepare, shards, ahead)
        prefetch.start()
    else:
        cache.follow(shards)
        prefetch = cache
    shelf = Shelf(open_shard, prefetch,
                   cache if open_file is not None and cache.effective_limit() else None,
                   open_file)

    bounds = [0, *range(min(first, chunk), len(ids), chunk), len(ids)]

    def fetch(k: int, nowait: bool = False) -> Any:
        lo, hi = bounds[k], bounds[k + 1]
        return fetch_chunk(shards[lo:hi], rows[lo:hi], shelf, nowait)

    try:
        if item is not None:
            for lo in range(0, len(ids), chunk):
                prefetch.advance(lo)
                for shard in np.unique(shards[lo:lo + chunk]).tolist():
                    if shelf.kept(shard):
                        shelf.reader(shard)
                yield [item(i) for i in ids[lo:lo + chunk].tolist()]
        else:
            with ThreadPoolExecutor(1, thread_name_prefix="streaming-read") as pool:
                reads = _Reads(pool, fetch)
                pending = reads.start(0)
                for k in range(len(bounds) - 1):
                    prefetch.advance(bounds[k])
                    fetched = pending.result()
                    if k + 2 < len(bounds):
                        pending = reads.start(k + 1)
                    yield decode(fetched, columns, views)
        prefetch.check()
    finally:
        prefetch.stop()


class _Reads:
    """Starts the read of chunk k: right here when its shards are open and its bytes are all in
    the page cache (a preadv2 with RWF_NOWAIT says so without waiting), else in the reader
    thread, which overlaps waiting for the disk (or a download) with decoding the chunk before.
    A reader thread for page-cache reads only costs: each of its ~1,000 positional reads per
    chunk hands the GIL to and from the decoding thread (one process, no DataLoader workers,
    250,000 token samples from page cache: x0.65-0.76 the CPU, benchmarks/page_reads.py).

    Where several processes read the same shards (DataLoader workers, ranks), the kernel refuses
    many no-wait reads of cached pages (2-60% of chunks with 2 workers), and each refusal is a
    read started twice; after REFUSALS_SEEN reads, more than a quarter refused stops the
    attempts for this pass."""

    REFUSALS_SEEN = 16

    def __init__(self, pool: ThreadPoolExecutor, fetch: Callable[..., Any]) -> None:
        self._pool = pool
        self._fetch = fetch
        self._nowait = NOWAIT_READS
        self._tried = self._refused = 0

    def start(self, k: int) -> Future:
        if self._nowait:
            try:
                done: Future = Future()
                done.set_result(self._fetch(k, True))
                self._tried += 1
                return done
            except NotOpen:
                pass
            except BlockingIOError:
                self._tried += 1
                self._refused += 1
                if self._tried >= self.REFUSALS_SEEN and 4 * self._refused > self._tried:
                    self._nowait = False
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                self._nowait = False  # a filesystem without RWF_NOWAIT: always use the thread
        return self._pool.submit(self._fetch, k)


def read_size(mean_sample_bytes: float, multiple: int = 1, *, limited: bool = False) -> int:
    """Rows per vectorised read: about READ_BYTES of samples, at most MAX_READ (or one
    `multiple`), rounded down to a multiple of `multiple` (a batch size).

    `limited` (a cache_limit in force) lifts the row cap: each read then pins every shard it
    touches once, so under a shuffle fewer, larger reads mean fewer shards evicted and fetched
    again."""
    rows = int(READ_BYTES // max(mean_sample_bytes, 1))
    return max((rows if limited else min(rows, MAX_READ)) // multiple, 1) * multiple
