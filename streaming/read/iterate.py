"""The worker side of an epoch: read the rows of this worker's planned ids in plan order, many at
a time (positional reads by a reader thread, one vectorised decode per read), while a
`ShardSource` prepares the shards ahead of use."""

from __future__ import annotations

import errno
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from streaming.format.shard import NOWAIT_READS
from streaming.read.chunk_copy import Fetched, NotOpen, PassReaders, decode, tally_chunk
from streaming.read.chunk_copy import fetch as fetch_chunk
from streaming.read.shard_rows import ShardRows
from streaming.read.sizing import DEFAULT_SIZE, ReadSize
from streaming.util.exit_close import closed_at_exit


def iter_chunks(ids: np.ndarray, rows: ShardRows, size: ReadSize = DEFAULT_SIZE, *,
                columns: bool = False, views: bool = False,
                handed_on: bool = False) -> Iterator[list[Any]]:
    """Yield the decoded rows of planned ids (skipping -1 padding) `size.rows` at a time (the
    first chunk only `size.first`, for a quick first batch), with `rows.source` preparing
    shards ahead. A chunk is a list of samples, or with `columns` a list of per-column value
    lists (one batch, no per-sample dicts; with `views` too, `bytes` values are memoryviews of
    the chunk's buffer, or of the decoded Parquet row groups, for a consumer that copies them
    at once).

    The first chunk is read here and handed over before any other read; then the rows of chunk
    k + 1 are copied out by a reader thread (positional reads release the GIL) while chunk k is
    decoded in one vectorised pass.

    The shards the source marks pinned are read under a pin, one at a time, through a
    descriptor closed after each read (`rows.open_file` validates a shard once per pass),
    since an open file of an evicted shard would keep its blocks (see `chunk_copy`); others
    stay open (`rows.reader`). `rows.tally` counts what each chunk read copied.

    Args:
        ids: the planned global sample ids, -1 for padding.
        rows: the rows read, their shards and the source making them ready.
        size: rows per read.
        columns: yield per-column value lists instead of samples.
        views: with `columns`, `bytes` values as memoryviews of the read buffer (or of the
            decoded row groups).
        handed_on: others go on with the pass: at its end, only `stop` the source.
    """
    return closed_at_exit(_chunks(ids, rows, size, columns, views, handed_on))


def iter_id_chunks(ids: np.ndarray, rows: ShardRows, size: ReadSize = DEFAULT_SIZE
                   ) -> Generator[list[int], None, None]:
    """The planned ids (skipping -1 padding) `size.rows` at a time, for a reader that reads
    each sample itself (a dataset whose `__getitem__` is overridden): `rows.source` still
    prepares the shards ahead, and the kept shards of each chunk are opened before it is
    handed over.

    Args:
        ids: the planned global sample ids, -1 for padding.
        rows: the rows read, their shards and the source making them ready.
        size: rows per chunk.
    """
    return closed_at_exit(_id_chunks(ids, rows, size.rows))


@dataclass(frozen=True)
class _Pass:
    """One pass over planned ids: the real ids (padding dropped), their shards and rows, the
    readers of the pass; `rows.source` already follows the shards."""

    ids: np.ndarray
    shards: np.ndarray
    places: np.ndarray
    readers: PassReaders


def _begin_pass(ids: np.ndarray, rows: ShardRows) -> _Pass | None:
    """The pass over `ids` with the source following its shards, None when all are padding."""
    ids = ids[ids >= 0]
    if not len(ids):
        return None
    shards, places = rows.locate(ids)
    rows.source.follow(shards)
    return _Pass(ids, shards, places, PassReaders(rows))


def _chunks(ids: np.ndarray, rows: ShardRows, size: ReadSize, columns: bool, views: bool,
            handed_on: bool) -> Generator[list[Any], None, None]:
    run = _begin_pass(ids, rows)
    if run is None:
        return
    ids, shards, places, readers, source = run.ids, run.shards, run.places, run.readers, rows.source
    bounds = [0, *range(min(size.first, size.rows), len(ids), size.rows), len(ids)]

    def fetch(k: int, nowait: bool = False) -> Fetched:
        lo, hi = bounds[k], bounds[k + 1]
        return fetch_chunk(shards[lo:hi], places[lo:hi], readers, nowait,
                           views=views and columns)

    try:
        with ThreadPoolExecutor(1, thread_name_prefix="streaming-read") as pool:
            reads = _Reads(pool, fetch)
            pending = None
            for k in range(len(bounds) - 1):
                source.advance(bounds[k])
                fetched = fetch(k) if pending is None else pending.result()
                tally_chunk(rows.tally, fetched)
                if k > 0 and k + 2 < len(bounds):
                    pending = reads.start(k + 1)
                yield decode(fetched, columns, views)
                if k == 0 and len(bounds) > 2:
                    pending = reads.start(1)
        source.check()
    finally:
        (source.stop if handed_on else source.end)()


def _id_chunks(ids: np.ndarray, rows: ShardRows, chunk: int) -> Generator[list[int], None, None]:
    run = _begin_pass(ids, rows)
    if run is None:
        return
    ids, shards, readers, source = run.ids, run.shards, run.readers, rows.source
    try:
        for lo in range(0, len(ids), chunk):
            source.advance(lo)
            for shard in np.unique(shards[lo:lo + chunk]).tolist():
                if readers.kept(shard):
                    readers.reader(shard)
            yield ids[lo:lo + chunk].tolist()
        source.check()
    finally:
        source.end()


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
