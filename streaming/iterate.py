"""The worker side of an epoch: fetch this worker's slice of the node plan, prepare shards ahead
of use in background threads, and read rows in plan order, many at a time (positional reads by a
reader thread, one vectorised decode per read)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from streaming.coord.files import shm_dir
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.errors import CoordinationError
from streaming.format.shard import read_spans, samples_of

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
        if self.error is not None:
            raise CoordinationError(f"shard preparation failed: {self.error}") from self.error

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
) -> Iterator[list[Any]]:
    """Yield the decoded rows of planned ids (skipping -1 padding) `chunk` at a time (the
    first chunk only `first`, for a quick first batch), preparing shards ahead in threads.

    A chunk is a list of samples, or with `columns` a list of per-column value lists (one
    batch, no per-sample dicts). The rows of chunk k + 1 are copied out of their shards by a
    reader thread (positional reads release the GIL) while chunk k is decoded here, then a
    chunk is decoded in one vectorised pass. `item(i)`, when given, replaces the direct read
    (a user's `__getitem__` override; samples only).
    """
    ids = ids[ids >= 0]
    if not len(ids):
        return
    shards, rows = locate(ids)
    prefetch = Prefetcher(prepare, shards, ahead)
    prefetch.start()
    readers: dict[int, Any] = {}

    bounds = [0, *range(min(first, chunk), len(ids), chunk), len(ids)]

    def fetch(k: int) -> Any:
        lo, hi = bounds[k], bounds[k + 1]
        return _fetch(shards[lo:hi], rows[lo:hi], readers, open_shard, prefetch)

    try:
        if item is not None:
            for lo in range(0, len(ids), chunk):
                prefetch.advance(lo)
                for shard in np.unique(shards[lo:lo + chunk]).tolist():
                    _open(readers, shard, open_shard, prefetch)
                yield [item(i) for i in ids[lo:lo + chunk].tolist()]
        else:
            with ThreadPoolExecutor(1, thread_name_prefix="streaming-read") as pool:
                pending = pool.submit(fetch, 0)
                for k in range(len(bounds) - 1):
                    prefetch.advance(bounds[k])
                    fetched = pending.result()
                    if k + 2 < len(bounds):
                        pending = pool.submit(fetch, k + 1)
                    yield _decode(fetched, columns)
        prefetch.check()
    finally:
        prefetch.stop()


def read_size(mean_sample_bytes: float, multiple: int = 1) -> int:
    """Rows per vectorised read: about READ_BYTES of samples, at most MAX_READ (or one
    `multiple`), rounded down to a multiple of `multiple` (a batch size)."""
    rows = min(int(READ_BYTES // max(mean_sample_bytes, 1)), MAX_READ)
    return max(rows // multiple, 1) * multiple


def _open(readers: dict[int, Any], shard: int, open_shard: Callable[[int], Any],
          prefetch: Prefetcher) -> Any:
    reader = readers.get(shard)
    if reader is None:
        prefetch.check()
        reader = readers[shard] = open_shard(shard)
    return reader


def _fetch(shards: np.ndarray, rows: np.ndarray, readers: dict[int, Any],
           open_shard: Callable[[int], Any], prefetch: Prefetcher) -> tuple:
    """Copy one chunk's rows (in plan order) into one buffer with positional reads from each
    shard: ("read", codec, readers, which, rows, buffer, starts, ends). Streams of different
    schemas are decoded right here, shard by shard: ("done", samples)."""
    uniq, which = np.unique(shards, return_inverse=True)
    opened = [_open(readers, shard, open_shard, prefetch) for shard in uniq.tolist()]
    codec = opened[0].codec
    if any(reader.codec != codec for reader in opened):
        return ("done", _read_by_shard(shards, rows, readers, open_shard, prefetch))
    starts, ends = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
    for k, reader in enumerate(opened):
        part = np.flatnonzero(which == k) if len(opened) > 1 else slice(None)
        starts[part], ends[part] = reader.spans(rows[part])
    buffer, lo, hi = read_spans([r.fileno() for r in opened], which, starts, ends)
    return ("read", codec, opened, which, rows, buffer, lo, hi)


def _decode(fetched: tuple, columns: bool) -> list[Any]:
    """Decode a fetched chunk into samples or columns (a corrupt row raises its shard's error)."""
    if fetched[0] == "done":
        samples = fetched[1]
        return [[s[name] for s in samples] for name in samples[0]] if columns else samples
    _, codec, opened, which, rows, buffer, lo, hi = fetched
    try:
        values = codec.decode_columns(buffer, lo, hi)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception:
        for k, reader in enumerate(opened):
            reader.get_columns(rows[which == k])  # raises the shard's precise error
        raise
    return values if columns else samples_of(codec.column_names, values)


def _read_by_shard(shards: np.ndarray, rows: np.ndarray, readers: dict[int, Any],
                   open_shard: Callable[[int], Any], prefetch: Prefetcher) -> list[Any]:
    """One chunk in plan order, decoded shard by shard (shards with different schemas)."""
    order = np.argsort(shards, kind="stable")
    grouped = shards[order]
    cuts = np.flatnonzero(grouped[1:] != grouped[:-1]) + 1
    out: list[Any] = [None] * len(rows)
    for part in np.split(order, cuts):
        reader = _open(readers, int(shards[part[0]]), open_shard, prefetch)
        _place(out, part.tolist(), reader.get_many(rows[part], copy=True))
    return out


def _place(out: list[Any], where: list[int], values: Any) -> None:
    for k, value in zip(where, values):
        out[k] = value
