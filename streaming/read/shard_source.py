"""The seam between the reader and whatever makes shards ready: a `ShardSource`.

The reader tells its source the shard of every sample it will read (`follow`), how far it has
got (`advance`) and when its pass is over (`end`); the source prepares shards ahead. A pass
that others go on with (DataLoader workers after the training process read the first batch)
only `stop`s, and what it would read next stays wanted until `withdraw`. Shards the
source marks `pinned` are read under `acquire`/`release` (they may be evicted in between); the
others are opened once and kept.
`CacheEngine` is the source of datasets with remote streams; `LocalSource` the one of local-only
datasets, which only has to prepare (decompress, verify) shards ahead of the reader.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from streaming.cache.engine.cache_engine import PREPARE_THREADS
from streaming.coord.wait import Deadline

if TYPE_CHECKING:
    from streaming.cache.engine.cache_engine import CacheEngine
    from streaming.cache.prepare.preparer import ShardPreparer


STOP_TIMEOUT = 60.0  # seconds a stopped pass waits for the preparations under way
REOPEN_TRIES = 3  # times a shard deleted between acquire and open is fetched again
Opened = TypeVar("Opened", covariant=True)


class FileOpener(Protocol[Opened]):
    """Opens a shard's ready file: as a reader checked against the index (the dataset's
    catalog), or as a layout and descriptor (`chunk_copy.PinnedLayouts`)."""

    def open_file(self, shard: int, path: Path) -> Opened:
        """`shard`'s ready raw file at `path`, opened."""


class Preparer(Protocol):
    """Makes a shard's raw file ready on this node (`cache.prepare.preparer.ShardPreparer`)."""

    def prepare(self, shard: int) -> Path:
        """`shard`'s ready raw file (fetched, decompressed, verified as needed)."""


class ShardSource(Protocol):
    """What the reader needs of the thing that makes shards ready to read."""

    def follow(self, shards: np.ndarray) -> None:
        """Start preparing ahead for a reader that reads one sample of `shards[i]` per step i."""

    def advance(self, position: int) -> None:
        """The reader is at step `position` of the sequence given to `follow`."""

    def acquire(self, shard: int, *, wait: bool = True) -> Path | None:
        """The ready raw file of `shard`, held until `release(shard)`; with `wait=False`,
        None (and nothing held) unless it is ready right now."""

    def release(self, shard: int) -> None:
        """Let go of a shard `acquire` returned."""

    def present(self, shards: np.ndarray) -> bool:
        """Whether every one of `shards` can be acquired right now without waiting."""

    def pinned(self) -> np.ndarray | None:
        """Mask of the shards to read under acquire/release, one read at a time, never kept
        open (they may be evicted between reads); None when every shard may stay open."""

    def lost(self, shard: int, path: Path) -> bool:
        """The file `acquire` returned was gone when the reader opened it; True when the
        source forgot it and will prepare it again on the next `acquire`."""

    def check(self) -> None:
        """Raise a preparation failure the reader has not met yet."""

    def stop(self) -> None:
        """Stop preparing ahead (shards may still be acquired)."""

    def end(self) -> None:
        """The reader's pass is over (ended, failed or closed early): stop preparing ahead
        and let go of what the pass would have needed next (`stop()`, then `withdraw()`)."""

    def withdraw(self) -> None:
        """Let go of what the last pass, stopped, would have needed next; a pass under way
        keeps its own."""


class LocalSource:
    """The `ShardSource` of local-only data: prepares the shards of the followed sequence
    `ahead` samples before the reader, in order of first use, with up to `threads` threads (a
    shuffled epoch's first read can need every shard). Nothing is ever evicted, so no shard is
    pinned and `acquire` is a (memoised) preparation.

    An error of a preparing thread is kept and raised by `check()` in the reading thread.
    """

    def __init__(self, preparer: Preparer, ahead: int, threads: int = PREPARE_THREADS) -> None:
        self._preparer = preparer
        self.ahead = max(int(ahead), 1)
        self.threads = max(int(threads), 1)
        self._pass: _Ahead | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pass": None}

    def follow(self, shards: np.ndarray) -> None:
        self.stop()
        self._pass = _Ahead(self._preparer, np.asarray(shards, np.int64), self.ahead,
                            self.threads)

    def advance(self, position: int) -> None:
        if self._pass is not None:
            self._pass.advance(position)

    def acquire(self, shard: int, *, wait: bool = True) -> Path | None:
        return self._preparer.prepare(int(shard))

    def release(self, shard: int) -> None:
        return None

    def present(self, shards: np.ndarray) -> bool:
        return True

    def pinned(self) -> np.ndarray | None:
        return None

    def lost(self, shard: int, path: Path) -> bool:
        return False  # local data: the missing file is the error, named by the open

    def check(self) -> None:
        """Re-raise a preparing thread's error as it is: the root cause's type and message."""
        if self._pass is not None and self._pass.error is not None:
            raise self._pass.error

    def stop(self) -> None:
        if self._pass is not None:
            self._pass.stop()

    def end(self) -> None:
        self.stop()

    def withdraw(self) -> None:
        return None  # nothing is evicted, so nothing is wanted


class _Ahead:
    """One pass of a `LocalSource`: its threads and how far the reader has got."""

    def __init__(self, preparer: Preparer, shards: np.ndarray, ahead: int,
                 threads: int) -> None:
        self._preparer = preparer
        self._shards, self._first_use = first_uses(shards)
        self._ahead = ahead
        self._position = 0
        self._next = 0
        self._wake = threading.Condition()
        self._stop = False
        self.error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._run, daemon=True, name=f"streaming-prefetch-{k}")
            for k in range(max(1, min(threads, len(self._shards))))]
        for thread in self._threads:
            thread.start()

    def advance(self, position: int) -> None:
        """Note the reader's step (wakes threads waiting for it to come closer)."""
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
                self._preparer.prepare(shard)
        except BaseException as exc:  # surfaced in the reader by check()
            self.error = exc

    def stop(self) -> None:
        """Start no more preparations and wait (up to STOP_TIMEOUT seconds) for those under
        way, so that a pass that ends, or fails, leaves no half-written file behind."""
        self._stop = True
        with self._wake:
            self._wake.notify_all()
        deadline = Deadline(STOP_TIMEOUT)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(deadline.remaining(), 0.0))


def first_uses(shards: np.ndarray) -> tuple[list[int], list[int]]:
    """The distinct shards in order of first use, and where each is first used (an O(n)
    scatter-min instead of sorting the whole slice)."""
    if not len(shards):
        return [], []
    first = np.full(int(shards.max()) + 1, len(shards), np.int64)
    np.minimum.at(first, shards, np.arange(len(shards)))
    used = np.flatnonzero(first < len(shards))
    order = np.argsort(first[used], kind="stable")
    return used[order].tolist(), first[used][order].tolist()


def shard_source(engine: CacheEngine | None, preparer: ShardPreparer, ahead: int) -> ShardSource:
    """A dataset's source: its node cache engine, or without one (every stream local-only) a
    LocalSource preparing shards `ahead` samples before the reader."""
    return engine if engine is not None else LocalSource(preparer, ahead)


def acquire_open(source: ShardSource, shard: int, opener: FileOpener[Opened], *,
                 wait: bool = True) -> Opened | None:
    """`opener.open_file(shard, path)` of `shard`'s acquired file, the shard staying acquired
    (the caller releases it); None when `wait=False` and it is not ready. A file deleted
    between the acquire and the open (a clean-up script, another job) is prepared again and
    reopened.

    Args:
        source: what makes the shard ready.
        shard: the shard to open.
        opener: opens the ready file (as a reader, or as a layout and descriptor).
        wait: whether to wait for a shard that is not ready.
    """
    for attempt in range(REOPEN_TRIES):
        path = source.acquire(shard, wait=wait)
        if path is None:
            return None
        try:
            return opener.open_file(shard, path)
        except FileNotFoundError:
            source.release(shard)
            if attempt == REOPEN_TRIES - 1 or not source.lost(shard, path):
                raise
        except BaseException:
            source.release(shard)
            raise
    raise AssertionError("unreachable")
