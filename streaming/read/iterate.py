"""The worker side of an epoch: read the rows of this worker's planned ids in plan order, many at
a time (positional reads by a reader thread, one vectorised decode per read), while a
`ShardSource` prepares the shards ahead of use."""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from streaming.format.shard import NOWAIT_READS, ShardReader
from streaming.read.shard_source import ShardSource
from streaming.read.shelf import Fetched, NotOpen, ReadChunk, Shelf, decode
from streaming.read.shelf import fetch as fetch_chunk

READ_BYTES = 16 << 20  # sample bytes decoded per vectorised read (bounds the copies held)
MAX_READ = 1024  # rows per read: enough that a shuffled read still has many rows per shard


class ReadSink(Protocol):
    """Where a tally also reports its counts (a loader collecting its workers' reads)."""

    def add(self, bytes_read: int, rows: int) -> None: ...


@dataclass
class ReadTally:
    """What this process's chunk reads copied out of shards on local disk so far: `bytes_read`,
    the raw bytes of the rows (added once per chunk), and `rows`, the rows read. Each count is
    also passed to `sink` when one is set."""

    bytes_read: int = 0
    rows: int = 0
    sink: ReadSink | None = field(default=None, compare=False, repr=False)

    def add(self, fetched: Fetched) -> None:
        """Count one fetched chunk (a chunk of mixed schemas counts its rows only: its
        shards were decoded as they were read)."""
        if isinstance(fetched, ReadChunk):
            size, rows = int((fetched.hi - fetched.lo).sum()), len(fetched.rows)
        else:
            size, rows = 0, len(fetched.samples)
        self.bytes_read += size
        self.rows += rows
        if self.sink is not None:
            self.sink.add(size, rows)


def iter_chunks(
    ids: np.ndarray,
    locate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    open_shard: Callable[[int], ShardReader],
    source: ShardSource,
    item: Callable[[int], Any] | None = None,
    *,
    chunk: int = MAX_READ,
    first: int = 64,
    columns: bool = False,
    views: bool = False,
    open_file: Callable[[int, Path], ShardReader] | None = None,
    tally: ReadTally | None = None,
) -> Iterator[list[Any]]:
    """Yield the decoded rows of planned ids (skipping -1 padding) `chunk` at a time (the
    first chunk only `first`, for a quick first batch), with `source` preparing shards ahead.

    A chunk is a list of samples, or with `columns` a list of per-column value lists (one
    batch, no per-sample dicts; with `views` too, `bytes` values are memoryviews of the
    chunk's buffer, for a consumer that copies them at once). The rows of chunk k + 1 are
    copied out of their shards by a reader thread (positional reads release the GIL) while
    chunk k is decoded here, then a chunk is decoded in one vectorised pass. `item(i)`, when
    given, replaces the direct read (a user's `__getitem__` override; samples only).

    With `open_file`, the shards `source` marks pinned are read under a pin, one at a time,
    through a descriptor closed after each read (`open_file(shard, path)` validates a shard once
    per pass), since an open file of an evicted shard would keep its blocks (see `shelf`). Other
    shards stay open (`open_shard`).

    `tally`, when given, counts the bytes and rows each chunk read copied (not `item`'s).
    """
    ids = ids[ids >= 0]
    if not len(ids):
        return
    shards, rows = locate(ids)
    source.follow(shards)
    shelf = Shelf(open_shard, source, open_file)

    bounds = [0, *range(min(first, chunk), len(ids), chunk), len(ids)]

    def fetch(k: int, nowait: bool = False) -> Fetched:
        lo, hi = bounds[k], bounds[k + 1]
        return fetch_chunk(shards[lo:hi], rows[lo:hi], shelf, nowait)

    try:
        if item is not None:
            yield from _item_chunks(ids, shards, chunk, source, shelf, item)
        else:
            with ThreadPoolExecutor(1, thread_name_prefix="streaming-read") as pool:
                reads = _Reads(pool, fetch)
                pending = reads.start(0)
                for k in range(len(bounds) - 1):
                    source.advance(bounds[k])
                    fetched = pending.result()
                    if tally is not None:
                        tally.add(fetched)
                    if k + 2 < len(bounds):
                        pending = reads.start(k + 1)
                    yield decode(fetched, columns, views)
        source.check()
    finally:
        source.stop()


def _item_chunks(ids: np.ndarray, shards: np.ndarray, chunk: int, source: ShardSource,
                 shelf: Shelf, item: Callable[[int], Any]) -> Iterator[list[Any]]:
    """`iter_chunks` through `item(i)`: the shards still prepared ahead and kept open."""
    for lo in range(0, len(ids), chunk):
        source.advance(lo)
        for shard in np.unique(shards[lo:lo + chunk]).tolist():
            if shelf.kept(shard):
                shelf.reader(shard)
        yield [item(i) for i in ids[lo:lo + chunk].tolist()]


class _Reads:
    """Starts the read of chunk k: right here when its shards are open and its bytes are all in
    the page cache (a preadv2 with RWF_NOWAIT says so without waiting), else in the reader
    thread, which overlaps waiting for the disk (or a download) with decoding the chunk before.
    A reader thread for page-cache reads only costs: each of its many positional reads per
    chunk hands the GIL to and from the decoding thread (benchmarks/page_reads.py measures it).

    Where several processes read the same shards (DataLoader workers, ranks), the kernel may
    refuse many no-wait reads of cached pages, and each refusal is a read started twice; after
    REFUSALS_SEEN reads, more than a quarter refused stops the attempts for this pass."""

    REFUSALS_SEEN = 16

    def __init__(self, pool: ThreadPoolExecutor, fetch: Callable[[int, bool], Fetched]) -> None:
        self._pool = pool
        self._fetch = fetch
        self._nowait = NOWAIT_READS
        self._tried = self._refused = 0

    def start(self, k: int) -> Future[Fetched]:
        if self._nowait:
            try:
                done: Future[Fetched] = Future()
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
