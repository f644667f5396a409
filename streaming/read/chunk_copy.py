"""One chunk's rows copied out of their shards in plan order, then decoded; and the shard readers
of one pass (`PassReaders`) they are copied through.

Shards a pass may keep open stay open. Shards under a cache_limit may be evicted between two
reads, and an open file of an evicted shard would keep its blocks on disk, so those are read
under a pin, one at a time, through a descriptor opened for that read only; their layout (offsets
and codec) is validated once per pass and remembered, so each later read costs an open and a
positional read, not a re-validation.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import ShardCorruptError
from streaming.format.encodings.encoding import FileBytes
from streaming.format.rows import RowCodec
from streaming.format.sample import SampleCodec
from streaming.format.shard import (
    ShardLayout,
    ShardReader,
    read_spans,
    read_spans_into,
    samples_of,
)
from streaming.read.open_shards import MIN_CAPACITY, default_capacity
from streaming.read.shard_rows import ReadTally, ShardRows
from streaming.read.shard_source import FileOpener, acquire_open
from streaming.util.at_once import run_as_they_come

# Shards of one chunk decoded at once before its rows are taken (Parquet row groups: the
# decoder releases the GIL).
DECODES_AT_ONCE = max(2, min(4, os.cpu_count() or 1))
LAYOUT_BYTES = 64 << 20  # offsets of pinned shards remembered per pass (LRU beyond that)


class NotOpen(BlockingIOError):
    """A chunk's shard is not open (or not present) yet: its read may wait for a download."""


@dataclass(frozen=True)
class ReadChunk:
    """A chunk's rows copied into one buffer, in plan order, still to decode: row k is
    `buffer[lo[k]:hi[k]]`, row `rows[k]` of the `which[k]`-th shard of `readers` (asked again
    only to explain a decode error; None where the shards were read under a pin)."""

    codec: SampleCodec | RowCodec
    readers: Iterable[ShardReader] | None
    which: np.ndarray
    rows: np.ndarray
    buffer: FileBytes | bytes | bytearray | memoryview
    lo: np.ndarray
    hi: np.ndarray


@dataclass(frozen=True)
class DecodedChunk:
    """A chunk decoded shard by shard while it was read: over shards of different schemas, its
    samples; over shards of one schema whose rows are not byte spans (Parquet row groups), its
    columns, one list per name, with no dict per sample.

    Args:
        samples: the samples in plan order (None: see `columns`).
        columns: with one schema, each column's values in plan order.
        names: the columns' names.
        nbytes: the bytes the shards' decodes read from disk for this chunk.
    """

    samples: list[Any] | None
    columns: list[list[Any]] | None = None
    names: list[str] | None = None
    nbytes: int = 0


Fetched = ReadChunk | DecodedChunk


def by_span(codec: SampleCodec | RowCodec) -> bool:
    """Whether rows of `codec` are byte spans of their shard, copied by positional reads (a
    Parquet row group is not: it is decoded whole and read through `get_many`)."""
    return getattr(codec, "by_span", True)


def tally_chunk(tally: ReadTally, fetched: Fetched) -> None:
    """Count one fetched chunk in `tally` (a chunk decoded shard by shard counts the bytes its
    decodes read: a Parquet row group's column chunks once, an MDS shard's none)."""
    if isinstance(fetched, ReadChunk):
        tally.add(int((fetched.hi - fetched.lo).sum()), len(fetched.rows))
    elif fetched.columns is not None:
        tally.add(fetched.nbytes, len(fetched.columns[0]) if fetched.columns else 0)
    else:
        tally.add(fetched.nbytes, len(fetched.samples or ()))


class PassReaders:
    """The shard readers of one pass over `rows`: kept open (`rows.reader`), or, for the shards
    `rows.source` marks pinned, read under a pin through their layout.

    Args:
        rows: the rows read, their shards and the source making them ready.
    """

    def __init__(self, rows: ShardRows) -> None:
        self._rows = rows
        self._source = rows.source
        self._pinned = rows.source.pinned()
        self._opened: set[int] = set()  # kept shards opened (so prepared) in this pass
        # Kept shards one chunk read may hold open at once: half what OpenShards keeps open.
        self.group_shards = max(MIN_CAPACITY, default_capacity() // 2)
        self._layouts = PinnedLayouts(rows)

    def kept(self, shard: int) -> bool:
        """Whether `shard` is kept open (not read under a pin)."""
        return self._pinned is None or not self._pinned[shard]

    def ready_now(self, shards: list[int]) -> bool:
        """Whether every shard can be read without waiting for a download: kept ones open,
        pinned ones present."""
        pinned = [s for s in shards if not self.kept(s)]
        return (all(s in self._opened for s in shards if self.kept(s))
                and (not pinned or self._source.present(np.asarray(pinned))))

    def layout(self, shard: int) -> ShardLayout | None:
        """The remembered layout of a pinned shard (None before its first read this pass)."""
        return self._layouts.get(shard)

    def codec(self, shard: int) -> SampleCodec | RowCodec | None:
        """The codec the index gives `shard` (no file opened)."""
        return self._rows.codec(shard)

    def reader(self, shard: int) -> ShardReader:
        """The open reader of a kept shard (opened, and prepared, on first use). Asked of
        `rows.reader` every time: it bounds the readers open at once (see open_shards)."""
        if shard not in self._opened:
            self._source.check()
        reader = self._rows.reader(shard)
        self._opened.add(shard)
        return reader

    @contextlib.contextmanager
    def lend(self, shard: int) -> Iterator[ShardReader]:
        """A full reader of `shard` for the duration of the block."""
        if self.kept(shard):
            yield self.reader(shard)
            return
        reader = acquire_open(self._source, shard, self._rows)
        assert reader is not None  # acquired waiting
        try:
            yield reader
        finally:
            try:
                reader.close()
            finally:
                self._source.release(shard)

    @contextlib.contextmanager
    def pinned(self, shard: int, nowait: bool = False) -> Iterator[tuple[ShardLayout, int]]:
        """The layout and a descriptor of a shard under the cache_limit, pinned for the block
        (validated on its first use in the pass); with `nowait`, NotOpen instead of waiting
        for it to arrive. A present shard's header was just written, so its first open reads
        the page cache."""
        opened = acquire_open(self._source, shard, self._layouts, wait=not nowait)
        if opened is None:
            raise NotOpen(f"shard {shard} is not present")
        try:
            yield opened
        finally:
            try:
                os.close(opened[1])
            finally:
                self._source.release(shard)



class PinnedLayouts:
    """The layouts of the pinned shards one pass read (validated through `files` on a shard's
    first read, at most LAYOUT_BYTES of them, least recently used forgotten first): the
    `FileOpener` of pinned reads, which open a layout and a descriptor, not a reader.

    Args:
        files: opens a shard's ready file as a reader checked against the index.
    """

    def __init__(self, files: FileOpener[ShardReader]) -> None:
        self._files = files
        self._layouts: OrderedDict[int, ShardLayout] = OrderedDict()
        self._bytes = 0

    def get(self, shard: int) -> ShardLayout | None:
        """The remembered layout of `shard`, None before its first read."""
        return self._layouts.get(shard)

    def open_file(self, shard: int, path: Path) -> tuple[ShardLayout, int]:
        """The layout of `shard`'s ready file at `path` (validated on first use) and a new
        descriptor of that file."""
        layout = self._layouts.get(shard)
        if layout is None:
            with self._files.open_file(shard, path) as reader:
                layout = self._remember(shard, reader.layout())
        else:
            self._layouts.move_to_end(shard)
        return layout, layout.open()

    def _remember(self, shard: int, layout: ShardLayout) -> ShardLayout:
        self._layouts[shard] = layout
        self._bytes += layout.nbytes
        while self._bytes > LAYOUT_BYTES and len(self._layouts) > 1:
            _, old = self._layouts.popitem(last=False)
            self._bytes -= old.nbytes
        return layout


def fetch(shards: np.ndarray, rows: np.ndarray, readers: PassReaders,
          nowait: bool = False, *, views: bool = False) -> Fetched:
    """Copy one chunk's rows (in plan order) into one buffer with positional reads from each
    shard (a ReadChunk). Streams of different schemas are decoded right here, shard by shard
    (a DecodedChunk; with `views`, its binary values are memoryviews of the decoded shards).
    With `nowait`, BlockingIOError instead of any wait: a shard not open or present yet, or not
    in page cache."""
    uniq, which = np.unique(shards, return_inverse=True)
    listed = uniq.tolist()
    if nowait and not readers.ready_now(listed):
        raise NotOpen("a shard of this chunk is not open yet")
    if not all(readers.kept(shard) for shard in listed):
        return _fetch_pinned(uniq, which, rows, readers, nowait, views)
    codecs = [readers.codec(shard) for shard in listed]  # from the index: no shard opened
    if any(codec is not None and not by_span(codec) for codec in codecs):
        # decoded shard by shard, each as soon as it has arrived, not all opened first
        same = all(codec == codecs[0] for codec in codecs)
        return _decoded(uniq, which, rows, readers, codecs[0] if same else None, nowait, views)
    if len(listed) > readers.group_shards:
        return _fetch_grouped(uniq, which, rows, readers, nowait, views)
    opened = [readers.reader(shard) for shard in listed]
    codec = opened[0].codec
    if any(reader.codec != codec for reader in opened) or not by_span(codec):
        same = all(reader.codec == codec for reader in opened)
        return _decoded(uniq, which, rows, readers, codec if same else None, nowait,
                        views)
    starts, ends = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
    for k, reader in enumerate(opened):
        part = np.flatnonzero(which == k) if len(opened) > 1 else slice(None)
        starts[part], ends[part] = reader.spans(rows[part])
    buffer, lo, hi = read_spans([r.fileno() for r in opened], which, starts, ends,
                                nowait=nowait)
    return ReadChunk(codec, opened, which, rows, buffer, lo, hi)


def _fetch_grouped(uniq: np.ndarray, which: np.ndarray, rows: np.ndarray, readers: PassReaders,
                   nowait: bool, views: bool = False) -> Fetched:
    """`fetch` of a chunk spread over many kept shards, `readers.group_shards` at a time, so the
    descriptors one read needs stay far below the open-file limit (readers of earlier groups
    may be closed by later ones; a decode error re-opens them to explain itself)."""
    parts = _groups(which, len(uniq))
    listed = uniq.tolist()
    starts, ends = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
    codec = None
    for k, shard in enumerate(listed):  # spans first: the buffer is laid out in plan order
        reader = readers.reader(shard)
        if codec is None:
            codec = reader.codec
        if reader.codec != codec or not by_span(codec):
            same = all(readers.reader(other).codec == codec for other in listed)
            return _decoded(uniq, which, rows, readers, codec if same else None, nowait,
                            views)
        starts[parts[k]], ends[parts[k]] = reader.spans(rows[parts[k]])
    places = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(ends - starts, out=places[1:])
    lo, hi = places[:-1], places[1:]
    buffer = bytearray(int(places[-1]))
    view = memoryview(buffer)
    for first in range(0, len(listed), readers.group_shards):
        group = listed[first:first + readers.group_shards]
        fds = [readers.reader(shard).fileno() for shard in group]
        where = (which >= first) & (which < first + len(group))
        read_spans_into(view, fds, which[where] - first, starts[where], ends[where], lo[where],
                        hi[where], nowait=nowait)
    return ReadChunk(codec, _Readers(readers, listed), which, rows, FileBytes(buffer), lo, hi)


class _Readers:
    """The readers of a grouped chunk's shards, asked for again only when a decode error needs
    them (some may have been closed to stay within the open-file limit)."""

    def __init__(self, readers: PassReaders, shards: list[int]) -> None:
        self._pass = readers
        self._shards = shards

    def __iter__(self) -> Iterator[ShardReader]:
        return (self._pass.reader(shard) for shard in self._shards)


def _fetch_pinned(uniq: np.ndarray, which: np.ndarray, rows: np.ndarray, readers: PassReaders,
                  nowait: bool, views: bool = False) -> Fetched:
    """`fetch` holding one shard at a time, in plan order, into one buffer laid out in plan
    order (a batch's rows stay together in memory), sized up front from the shards' layouts."""
    parts = _groups(which, len(uniq))
    layouts = []
    for shard in uniq.tolist():
        if readers.layout(shard) is None:
            with readers.pinned(shard, nowait):
                pass  # validates the shard and remembers its layout
        layouts.append(readers.layout(shard))
    codec = layouts[0].codec
    if any(layout.codec != codec for layout in layouts) or not by_span(codec):
        same = all(layout.codec == codec for layout in layouts)
        return _decoded(uniq, which, rows, readers, codec if same else None, nowait,
                        views)
    starts, ends = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
    for layout, part in zip(layouts, parts):
        starts[part], ends[part] = layout.spans(rows[part])
    places = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(ends - starts, out=places[1:])
    lo, hi = places[:-1], places[1:]
    buffer = bytearray(int(places[-1]))
    view = memoryview(buffer)
    zeros = np.zeros(len(rows), np.int64)
    for k in np.argsort([part[0] for part in parts], kind="stable").tolist():  # plan order
        part = parts[k]
        with readers.pinned(int(uniq[k]), nowait) as (layout, fd):
            read_spans_into(view, [fd], zeros[:len(part)], starts[part], ends[part], lo[part],
                            hi[part], str(layout.path), nowait=nowait)
    return ReadChunk(codec, None, which, rows, FileBytes(buffer), lo, hi)


def _groups(which: np.ndarray, count: int) -> list[np.ndarray]:
    """Positions of each group 0..count-1 in `which`, each in plan order."""
    order = np.argsort(which, kind="stable")
    return np.split(order, np.searchsorted(which[order], np.arange(1, count)))


def decode(fetched: Fetched, columns: bool, views: bool = False) -> list[Any]:
    """Decode a fetched chunk into samples or columns (a corrupt row raises its shard's error,
    when the shards are still open); `views` as in `SampleCodec.decode_columns`."""
    if isinstance(fetched, DecodedChunk):
        if fetched.columns is not None:
            if columns:
                return fetched.columns
            return [dict(zip(fetched.names or (), values)) for values in zip(*fetched.columns)]
        samples = fetched.samples or []
        return [[s[name] for s in samples] for name in samples[0]] if columns else samples
    codec = fetched.codec
    try:
        values = codec.decode_columns(fetched.buffer, fetched.lo, fetched.hi, views=views)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:
        for k, reader in enumerate(fetched.readers or ()):
            reader.get_columns(fetched.rows[fetched.which == k])  # the shard's precise error
        raise ShardCorruptError(f"a chunk's samples do not decode: {type(exc).__name__}: "
                                f"{exc}") from exc
    return values if columns else samples_of(codec.column_names, values)


def _decoded(uniq: np.ndarray, which: np.ndarray, rows: np.ndarray, readers: PassReaders,
             codec: SampleCodec | RowCodec | None, nowait: bool = False,
             views: bool = False) -> DecodedChunk:
    """One chunk decoded shard by shard: its columns when every shard has schema `codec`, else
    (None: schemas differ) its samples. Each shard is decoded as soon as it is open, while the
    next ones are still arriving. With `nowait`, NotOpen unless every shard is open and already
    decoded in this process (a decode, such as a Parquet row group's, then runs on the reader
    thread while the chunk before is consumed). With `views`, binary values are memoryviews of
    the decoded shards, not new bytes."""
    if nowait and not all(readers.kept(shard) and readers.reader(shard).decoded()
                          for shard in uniq.tolist()):
        raise NotOpen("a shard of this chunk is not decoded yet")
    ahead = (readers.reader(shard) for shard in _in_order_of_use(uniq, which)
             if readers.kept(shard))
    run_as_they_come(lambda reader: reader.decode(), (r for r in ahead if not r.decoded()),
                     DECODES_AT_ONCE, name="streaming-decode")
    if codec is None:
        return _read_by_shard(uniq, which, rows, readers)
    names = list(codec.column_names)
    parts = _groups(which, len(uniq))
    out: list[list[Any]] = [[None] * len(rows) for _ in names]
    nbytes = 0
    for shard, part in zip(uniq.tolist(), parts):
        with readers.lend(shard) as reader:
            values = reader.get_columns(rows[part], copy=True, views=views)
            nbytes += reader.drain_bytes_read()
        if len(parts) == 1:
            return DecodedChunk(None, [list(column) for column in values], names, nbytes)
        places = part.tolist()
        for column, got in zip(out, values):
            for k, value in zip(places, got):
                column[k] = value
    return DecodedChunk(None, out, names, nbytes)


def _in_order_of_use(uniq: np.ndarray, which: np.ndarray) -> list[int]:
    """The chunk's shards (`uniq`, each row's in `which`) in the order its rows first use them:
    the order the cache fetches them in, so each is decoded as soon as it has arrived rather
    than behind a shard of lower number still on its way."""
    _, first = np.unique(which, return_index=True)
    return uniq[np.argsort(first, kind="stable")].tolist()


def _read_by_shard(uniq: np.ndarray, which: np.ndarray, rows: np.ndarray, readers: PassReaders
                   ) -> DecodedChunk:
    """One chunk in plan order, decoded shard by shard (shards with different schemas)."""
    out: list[Any] = [None] * len(rows)
    nbytes = 0
    for shard, part in zip(uniq.tolist(), _groups(which, len(uniq))):
        with readers.lend(shard) as reader:
            for k, value in zip(part.tolist(), reader.get_many(rows[part], copy=True)):
                out[k] = value
            nbytes += reader.drain_bytes_read()
    return DecodedChunk(out, nbytes=nbytes)
