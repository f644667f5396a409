"""The worker side of an epoch: fetch this worker's slice of the node plan, prepare shards ahead
of use in a background thread, and read rows in plan order."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from streaming.coord.files import shm_dir
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.errors import CoordinationError

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


class Prefetcher(threading.Thread):
    """Prepares the shards of an ordered id slice ahead of the reader, `ahead` samples ahead.

    An exception here is stored and re-raised by `check()` in the iterating thread.
    """

    def __init__(self, prepare: Callable[[int], Any], shards: np.ndarray, ahead: int) -> None:
        super().__init__(daemon=True, name="streaming-prefetch")
        self._prepare = prepare
        uniq, first = np.unique(shards, return_index=True)
        order = np.argsort(first, kind="stable")
        self._shards = uniq[order].tolist()
        self._first_use = first[order].tolist()
        self._ahead = max(int(ahead), 1)
        self._position = 0
        self._wake = threading.Condition()
        self._stop = False
        self.error: BaseException | None = None

    def advance(self, position: int) -> None:
        """Tell the thread how far the reader has got (wakes it when it was waiting)."""
        self._position = position
        with self._wake:
            self._wake.notify()

    def run(self) -> None:
        try:
            for shard, first in zip(self._shards, self._first_use):
                with self._wake:
                    while not self._stop and first - self._position > self._ahead:
                        self._wake.wait(0.5)
                if self._stop:
                    return
                self._prepare(shard)
        except BaseException as exc:  # surfaced in the reader by check()
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise CoordinationError(f"shard preparation failed: {self.error}") from self.error

    def stop(self) -> None:
        self._stop = True
        with self._wake:
            self._wake.notify()


READ_BYTES = 16 << 20  # sample bytes decoded per vectorised read (bounds the copies held)
MAX_READ = 1024  # rows per read: enough that a shuffled read still has many rows per shard
RELEASE_BYTES = 32 << 20  # decoded bytes after which readers drop their mapped pages


def iter_chunks(
    ids: np.ndarray,
    locate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    open_shard: Callable[[int], Any],
    prepare: Callable[[int], Any],
    ahead: int,
    item: Callable[[int], Any] | None = None,
    *,
    chunk: int = MAX_READ,
    columns: bool = False,
) -> Iterator[list[Any]]:
    """Yield the decoded rows of planned ids (skipping -1 padding) `chunk` at a time, preparing
    shards ahead in a background thread.

    A chunk is a list of samples, or with `columns` a list of per-column value lists (one
    batch, no per-sample dicts). Each is one vectorised read per shard it touches. `item(i)`,
    when given, replaces the direct read (a user's `__getitem__` override; samples only).
    """
    ids = ids[ids >= 0]
    if not len(ids):
        return
    shards, rows = locate(ids)
    prefetch = Prefetcher(prepare, shards, ahead)
    prefetch.start()
    readers: dict[int, Any] = {}
    released = 0
    try:
        for lo in range(0, len(ids), chunk):
            prefetch.advance(lo)
            hi = min(lo + chunk, len(ids))
            if item is None:
                yield _read_chunk(shards[lo:hi], rows[lo:hi], readers, open_shard, prefetch,
                                  columns)
                released = _release(readers, released)
                continue
            for shard in np.unique(shards[lo:hi]).tolist():
                _open(readers, shard, open_shard, prefetch)
            yield [item(i) for i in ids[lo:hi].tolist()]
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


def _release(readers: dict[int, Any], released: int) -> int:
    """Every RELEASE_BYTES decoded, unmap the readers' pages (bounds RSS, see release_pages)."""
    decoded = sum(getattr(r, "decoded_bytes", 0) for r in readers.values())
    if decoded - released < RELEASE_BYTES:
        return released
    for reader in readers.values():
        if hasattr(reader, "release_pages"):
            reader.release_pages()
    return decoded


def _read_chunk(shards: np.ndarray, rows: np.ndarray, readers: dict[int, Any],
                open_shard: Callable[[int], Any], prefetch: Prefetcher, columns: bool
                ) -> list[Any]:
    """One chunk in plan order (samples, or columns), decoded shard by shard."""
    first = int(shards[0])
    if (shards == first).all():
        reader = _open(readers, first, open_shard, prefetch)
        return reader.get_columns(rows) if columns else reader.get_many(rows)
    order = np.argsort(shards, kind="stable")
    grouped = shards[order]
    cuts = np.flatnonzero(grouped[1:] != grouped[:-1]) + 1
    out: list[Any] = []
    for part in np.split(order, cuts):
        reader = _open(readers, int(shards[part[0]]), open_shard, prefetch)
        where = part.tolist()
        if not columns:
            out = out or [None] * len(rows)
            _place(out, where, reader.get_many(rows[part]))
            continue
        parts = reader.get_columns(rows[part])
        out = out or [[None] * len(rows) for _ in parts]
        for column, values in zip(out, parts):
            _place(column, where, values)
    return out


def _place(out: list[Any], where: list[int], values: Any) -> None:
    for k, value in zip(where, values):
        out[k] = value
