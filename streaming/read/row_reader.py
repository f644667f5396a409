"""Reading a catalog's rows in one process: shards made ready (through the node's cache, or in
place), kept open a few at a time, read one by one (`ds[i]`) or in planned chunks, in reads
sized to the cache (`streaming.read.sizing`). The dataset holds one `RowReader` and calls it;
nothing here calls the dataset back: what the reader needs of the dataset's catalog is the
`ShardCatalog` it was built with."""

from __future__ import annotations

import warnings
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from streaming.errors import PlanError
from streaming.format.rows import RowCodec
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader
from streaming.read.iterate import iter_chunks, iter_id_chunks
from streaming.read.open_shards import OpenShards
from streaming.read.sample_locator import SampleLocator
from streaming.read.shard_rows import ReadTally
from streaming.read.shard_source import ShardSource, acquire_open, shard_source
from streaming.read.sizing import DEFAULT_SIZE, FIRST_READ, ReadSize, read_size

if TYPE_CHECKING:
    from streaming.cache.engine.cache_engine import CacheEngine
    from streaming.cache.prepare.preparer import ShardPreparer
    from streaming.cache.table.cache_stats import CacheStats


def samples_ahead(predownload: int | None, batch_size: int | None) -> int:
    """Samples to prepare ahead of the reader: `predownload`, by default 8 batches."""
    if predownload is not None and predownload < 0:
        raise PlanError(f"predownload must be >= 0, got {predownload}")
    if predownload is not None and batch_size is not None and predownload < batch_size:
        warnings.warn(f"predownload < batch_size ({predownload} < {batch_size}): fewer "
                      "samples are prepared ahead than one batch takes, so batches wait for "
                      "downloads. This may result in slower batch time. Recommendation is to "
                      f"set predownload to at least batch_size ({batch_size})", stacklevel=3)
    return predownload if predownload is not None else 8 * (batch_size or 8)


def ids_of(index: slice | Sequence[int] | np.ndarray, num_samples: int) -> list[int]:
    """The sample ids a slice, an id array or a boolean mask over `num_samples` selects."""
    if isinstance(index, slice):
        return list(range(*index.indices(num_samples)))
    ids = np.asarray(index)
    if ids.dtype == bool:
        ids = np.flatnonzero(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"index must be an int, slice or 1-d integer array, got {index!r}")
    return [int(i) for i in ids]


class ShardCatalog(Protocol):
    """What the row reader needs of a dataset's catalog (`streaming.dataset.catalog.Catalog`).

    Args:
        locator: global sample id -> (shard, row).
        preparer: makes a shard's raw file ready on this node without a cache engine.
        mean_sample_bytes: the mean raw bytes of a sample, which reads are sized by.
    """

    locator: SampleLocator
    preparer: ShardPreparer

    @property
    def mean_sample_bytes(self) -> float: ...

    def open_file(self, shard: int, path: Path) -> ShardReader:
        """A reader of `shard`'s ready file at `path`, checked against the index."""

    def forget_decoded(self) -> None:
        """Drop what this process keeps decoded of the catalog's shards (at close)."""


class RowReader:
    """The rows of `catalog`, read through `cache` (None: every stream is read in place): the
    read side's `ShardRows`.

    Args:
        catalog: the dataset's shards: where samples are, how shard files open.
        cache: the node's cache engine, None when every stream is read in place.
        predownload: samples to prepare ahead of the reader.
        read_shard: see `PlanFit.read_shard`.
    """

    def __init__(self, catalog: ShardCatalog, cache: CacheEngine | None, predownload: int,
                 read_shard: int) -> None:
        self.catalog, self.cache, self.predownload = catalog, cache, predownload
        self.read_shard = read_shard
        self.readers = OpenShards(self)
        self.source: ShardSource = shard_source(cache, catalog.preparer, predownload)
        self.tally = ReadTally()  # what this process's chunk reads copied from local disk

    def prepare(self, shard: int) -> Path:
        """Make `shard` ready on this node; its raw file's path."""
        if self.cache is None:
            return self.catalog.preparer.prepare(shard)
        return self.cache.prepare(shard)

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shard and row of each global sample id in `ids`."""
        return self.catalog.locator.locate(ids)

    def open_file(self, shard: int, path: Path) -> ShardReader:
        """A reader of `shard`'s ready file at `path`, checked against the index."""
        return self.catalog.open_file(shard, path)

    def codec(self, shard: int) -> SampleCodec | RowCodec | None:
        """The codec the index gives `shard`, known without opening it."""
        return self.catalog.codec_of(shard)

    def open_prepared(self, shard: int) -> ShardReader:
        """A reader of `shard`, made ready first (`OpenShards` opens its misses here)."""
        cache = self.cache
        if cache is None:
            return self.open_file(shard, self.prepare(shard))
        reader = acquire_open(cache, shard, self)
        cache.release(shard)  # kept open: read without a pin (no limit, or not cached)
        assert reader is not None
        return reader

    def reader(self, shard: int) -> ShardReader:
        """An open reader of `shard` (at most `OpenShards.capacity` stay open at once)."""
        return self.readers.get(shard)

    def forget(self, shard: int) -> None:
        """Drop what this process holds of `shard` (its prepared path, its open reader)."""
        self.catalog.preparer.forget(shard)
        self.readers.forget(shard)

    def reads_pin(self) -> bool:
        """Whether reads pin the shards they touch: some are cached under the node's limit."""
        return self.cache is not None and self.cache.node_limit() is not None

    def pinned(self, shard: int) -> bool:
        """Whether `shard` is cached under the node's cache limit (then read under a pin, never kept
        open: an open file of an evicted shard would keep its blocks)."""
        cache = self.cache
        return (cache is not None and bool(cache.cached[shard])
                and cache.node_limit() is not None)

    def get(self, sample_id: int) -> dict[str, Any]:
        """The decoded sample with global id `sample_id` (negative counts from the end)."""
        shard, row = self.catalog.locator[sample_id]
        if not self.pinned(shard):
            return self.reader(shard).get(row)
        cache = self.cache
        assert cache is not None
        reader = acquire_open(cache, shard, self)
        assert reader is not None
        try:
            with reader:
                return reader.get_many([row], copy=True)[0]  # no view of the file outlives it
        finally:
            cache.release(shard)

    def read_size(self, multiple: int, readers: int, first: int = FIRST_READ) -> ReadSize:
        """Rows per vectorised read for `readers` readers of the node taking turns along its
        order, a multiple of `multiple` (see `streaming.read.sizing.rows_per_read`).

        Args:
            multiple: the batch size reads are a multiple of.
            readers: the node's readers (ranks times DataLoader workers).
            first: rows of the first read.
        """
        return read_size(self.catalog.mean_sample_bytes, multiple, first=first,
                         pinned=self.reads_pin(), read_shard=self.read_shard, readers=readers)

    def chunks(self, ids: np.ndarray, size: ReadSize = DEFAULT_SIZE, *, columns: bool = False,
               views: bool = False, handed_on: bool = False, epoch: int = 0
               ) -> Iterator[list[Any]]:
        """The rows of planned `ids` (of epoch `epoch`) in chunks of `size` (see `iter_chunks`),
        through this process's shard source.

        Args:
            ids: the planned global sample ids, -1 for padding.
            size: rows per read.
            columns: per-column value lists instead of samples.
            views: with `columns`, `bytes` values as memoryviews of the read buffer.
            handed_on: others go on with the pass (see `iter_chunks`).
            epoch: the epoch `ids` belong to (readers of the node keep within the cache's
                drift bound within one epoch).
        """
        self._begin_epoch(epoch)
        return iter_chunks(ids, self, size, columns=columns, views=views, handed_on=handed_on)

    def id_chunks(self, ids: np.ndarray, size: ReadSize = DEFAULT_SIZE, *, epoch: int = 0
                  ) -> Generator[list[int], None, None]:
        """Planned `ids` in chunks of `size.rows`, their shards made ready and opened ahead,
        for a caller that reads each sample itself (see `iter_id_chunks`).

        Args:
            ids: the planned global sample ids, -1 for padding.
            size: ids per chunk.
            epoch: as in `chunks`.
        """
        self._begin_epoch(epoch)
        return iter_id_chunks(ids, self, size)

    def _begin_epoch(self, epoch: int) -> None:
        if self.cache is not None:
            self.cache.drift.begin(epoch)

    def cache_stats(self) -> CacheStats:
        """The node cache's counters (all zero without a cache)."""
        from streaming.cache.table.cache_stats import CacheStats

        return CacheStats() if self.cache is None else self.cache.stats()

    def close(self) -> None:
        self.readers.close()
        self.catalog.forget_decoded()
        if self.cache is not None:
            self.cache.close()
