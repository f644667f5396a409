"""StreamingDataset: streams of MDS shards, planned per epoch over nodes, ranks and DataLoader
workers, read zero-copy from a node-local cache, resumable mid-epoch.

A facade over three parts: the catalog of streams and their indexes
(`streaming.dataset.catalog`), the plan fitted to the cache (`streaming.cache.policy.plan_fit`)
and the session on the node: coordination, epoch counter, plan publication and resumption state
(`streaming.dataset.session`)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from torch.utils.data import IterableDataset

from streaming.cache.policy.cache_limit import CacheLimit
from streaming.cache.policy.plan_fit import fit_plan
from streaming.coord.shm import clean_stale_shared_memory
from streaming.coord.world_detect import detect_world
from streaming.dataset.catalog import Catalog, build_streams, read_indexes
from streaming.dataset.column_batch import collate_column
from streaming.dataset.iteration_run import Iteration
from streaming.dataset.reference_api import ReferenceAPI
from streaming.dataset.session import Session
from streaming.errors import ArgumentError
from streaming.format.parquet_decoded import decoded_room
from streaming.observe.metrics import IterationWatch
from streaming.plan import PlanConfig, World
from streaming.plan.world import replication_factor
from streaming.read.row_reader import RowReader, ids_of, samples_ahead
from streaming.read.sizing import DEFAULT_SIZE, FIRST_READ, ReadSize
from streaming.stream import Stream

if TYPE_CHECKING:
    from streaming.cache.engine.cache_engine import CacheEngine
    from streaming.cache.table.cache_stats import CacheStats
    from streaming.read.shard_rows import ReadTally

logger = logging.getLogger(__name__)

__all__ = ["StreamingDataset", "clean_stale_shared_memory"]


class StreamingDataset(ReferenceAPI, IterableDataset):
    """An iterable (and randomly indexable) dataset over one or more MDS streams.

    Iteration yields this rank's share of each epoch in the planned global order; `ds[i]` reads
    any sample by global id. Every argument is keyword-only and has the reference's name;
    docs/dataset.md says more about each.

    Args:
        streams: Streams to mix; exclusive with `remote`/`local`. None or an empty list: one
            stream built from `remote`, `local` and `split`.
        remote: Source URL (`s3://`, `gs://`, `az://`, `https://`, `file://`) or path of a
            single stream; None: `local` is the data itself.
        local: Node-local folder: the cache of `remote`, or the data read in place without
            one. None with a `remote`: a per-user folder under the temp dir.
        split: Sub-folder of `remote`/`local` (e.g. "train"); None: the folder itself.
        epoch_size: Samples per epoch over all ranks (int or "100k", "2b"); None: every
            sample of every stream, as weighted.
        predownload: Samples ahead of the reader whose shards are prepared; None: 8 x
            `batch_size` (64 without one).
        cache_limit: Bytes (int or "10gb") the cache folders of remote streams never exceed,
            evicting the shards needed last; None: no limit.
        sampling_method: "balanced" (a partly used stream's subset changes each epoch) or
            "fixed" (the same every epoch).
        sampling_granularity: Consecutive samples drawn per shard at a time (1: single).
        partition_algo: "relaxed" (default) or "orig": how an epoch is split over nodes.
        num_canonical_nodes: Nodes the global order is planned for, whatever the topology;
            None: the number of nodes (x64 for py1s/py2s).
        batch_size: Per-device batch size; None: none. Needed by every batching method but
            "random" and by a mid-epoch resume with several DataLoader workers.
        shuffle: Shuffle each epoch (a new order every epoch); False: index order.
        shuffle_algo: "py1e" (default), "py1br", "py1s", "py2s" or "naive".
        shuffle_seed: Seed of every random choice (9176, as the reference).
        shuffle_block_size: Samples per block of the shard-aware shuffles; None:
            max(4_000_000 // num_canonical_nodes, 2**18), smaller under a tight cache_limit.
        batching_method: "random" (default), "stratified", "per_stream" or
            "device_per_stream".
        allow_unsafe_types: Allow `pkl` columns (unpickling can run code); False refuses them.
        replication: Consecutive ranks that receive identical samples (tensor or sequence
            parallelism); None: 1.
        download_retry: Extra attempts per file copy after an ordinary failure (streams may
            override); throttling is retried until its own deadline instead.
        download_timeout: Seconds per download attempt (streams may override).
        validate_hash: Hash algorithm ("xxh64", "sha1", ...) every shard is checked with
            before it is served; None: downloads are still checked when the index records a
            fast digest.
        keep_zip: Keep downloaded compressed shards after decompressing (False deletes them;
            local-only data is never deleted).
        stream_name: Registered Stream class of the single stream ("stream": `Stream`).
        stream_config: Extra keyword arguments for that Stream class.
        world: An explicit `streaming.plan.World`; None: detected (process group, torchrun,
            Lightning, SLURM, MPI). Not in the reference.
        mix_unit: "samples" (default), or "tokens" to read `proportion` as token shares.
            Not in the reference.
        lengths_column: The column whose per-sample lengths `mix_unit="tokens"` uses. Not in
            the reference.
        packing: Must be False: packed batches come from `PackedStreamingDataset(...)`, which
            takes these arguments and its own (`packing_length`, ...). Not in the reference.
    """

    def __init__(
        self, *, streams: Sequence[Stream] | None = None, remote: str | None = None,
        local: str | None = None, split: str | None = None, epoch_size: int | str | None = None,
        predownload: int | None = None, cache_limit: int | str | None = None,
        sampling_method: str = "balanced", sampling_granularity: int = 1,
        partition_algo: str = "relaxed", num_canonical_nodes: int | None = None,
        batch_size: int | None = None, shuffle: bool = False, shuffle_algo: str = "py1e",
        shuffle_seed: int = 9176, shuffle_block_size: int | None = None,
        batching_method: str = "random", allow_unsafe_types: bool = False,
        replication: int | None = None, download_retry: int = 2, download_timeout: float = 60,
        validate_hash: str | None = None, keep_zip: bool = False, stream_name: str = "stream",
        stream_config: dict[str, Any] | None = None, world: World | None = None,
        mix_unit: str = "samples", lengths_column: str = "tokens", packing: bool = False,
    ) -> None:
        _refuse_packing(type(self), packing)
        streams = build_streams(streams, remote, local, split, stream_name, stream_config,
                                download_retry=download_retry, download_timeout=download_timeout,
                                validate_hash=validate_hash, keep_zip=keep_zip)
        self.lengths_column = lengths_column
        if mix_unit != "samples":  # proportions are token shares: see docs/packing.md
            from streaming.dataset.token_mix import check_mix_unit

            check_mix_unit(streams, mix_unit)  # before anything is fetched
        self.predownload = samples_ahead(predownload, batch_size)
        limit = CacheLimit.parse(cache_limit)
        self.cache_limit, self.batch_size = cache_limit, batch_size
        self.shuffle, self.shuffle_seed = shuffle, shuffle_seed
        self.allow_unsafe_types = allow_unsafe_types
        self.replication = replication_factor(replication)
        self.world = world or detect_world(workers_per_rank=1, replication=self.replication)
        streams = _copied_to_cache(streams, limit)
        indexes = read_indexes(streams)
        if mix_unit == "tokens":
            from streaming.dataset.token_mix import mix_by_tokens

            streams, epoch_size = mix_by_tokens(streams, indexes, lengths_column, epoch_size)
        self.catalog = Catalog.of(streams, indexes, allow_unsafe_types=allow_unsafe_types)

        # An unweighted stream beside weighted ones counts as repeat=1 (docs/mixing.md).
        weighted = any(s.weighted for s in streams)
        config = PlanConfig(
            samples_per_shard=self.catalog.samples_per_shard,
            shards_per_stream=self.catalog.shards_per_stream,
            weights=tuple(s.weights for s in streams) if weighted else (),
            epoch_size=epoch_size, batch_size=batch_size, shuffle=shuffle,
            shuffle_algo=shuffle_algo, shuffle_seed=shuffle_seed,
            shuffle_block_size=shuffle_block_size, num_canonical_nodes=num_canonical_nodes,
            partition_algo=partition_algo, batching_method=batching_method,
            sampling_method=sampling_method, sampling_granularity=sampling_granularity)
        footprint = None if limit is None else self.catalog.footprint()
        fitted = fit_plan(config, self.world, footprint, limit,
                          0 if footprint is None else self.catalog.cache_other_bytes(),
                          decoded=self.catalog.decoded_footprint(), decoded_room=decoded_room())
        for message in fitted.warnings:
            logger.warning(message)
        self.config = fitted.config
        self._fill_stream_weights()  # Stream.proportion/repeat/choose, as the reference
        self._join_node(streams, limit, fitted.read_shard, detected=world is None)

    def _join_node(self, streams: list[Stream], limit: CacheLimit | None, read_shard: int, *,
                   detected: bool) -> None:
        """The session on the node, the node's shard cache under this process's `limit` and the
        row reader over it."""
        self.session = Session(self.config, self.world, [s.local_dir for s in streams],
                               detected=detected)
        try:
            self.cache = self._start_cache(limit)
        except BaseException:
            self.session.close()
            raise
        self.rows = RowReader(self.catalog, self.cache, self.predownload, read_shard)

    def _start_cache(self, limit: CacheLimit | None) -> CacheEngine | None:
        """The node-shared cache engine over the remote streams' folders (None when no stream
        caches shard bytes: local-only or read in place), under this process's `limit`; a node
        limit the epoch-0 node plan cannot run in is refused here, with the minimum in the
        CacheLimitError."""
        if self.catalog.caches_nothing:
            return None
        from streaming.cache.engine.cache_engine import CacheEngine  # not for local-only data

        engine = CacheEngine(self.catalog.preparer, cache_limit=limit,
                             predownload=self.predownload, flag=self.session.node,
                             job=self.session.namespace.token).attach()
        if engine.node_limit() is not None:
            try:
                plan = self.session.plans.node_plan(self.config, self.world, 0, 0)
                engine.check_plan(plan.ids, self.catalog.locator.shard_starts, plan.batch_size)
            except BaseException:
                engine.close()
                raise
        return engine

    @property
    def _watch(self) -> IterationWatch:
        watch = self.__dict__.get("_watch_")
        if watch is None:
            watch = self.__dict__["_watch_"] = IterationWatch(self)
        return watch

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_watch_", None)  # this process's metrics (and its plan closures) stay here
        return state

    def metrics(self) -> dict[str, float]:
        """What iterating this dataset in this process did so far, as `StreamingDataLoader.
        metrics()` gives it (a step is one read of many samples; see docs/dataset.md)."""
        return self._watch.metrics()

    def cache_stats(self) -> CacheStats:
        """What the node's shard cache did so far: hits, misses, downloads, bytes downloaded,
        evictions and seconds readers waited (all zero when every stream is local-only)."""
        return self.rows.cache_stats()

    def withdraw_horizon(self) -> None:
        """Stop keeping the shards a stopped `iter_batches(handed_on=True)` pass of this
        process would have read next from eviction (once its successors want them)."""
        self.rows.source.withdraw()

    def read_tally(self) -> ReadTally:
        """What this process's reads copied out of shards on local disk so far: raw bytes
        and rows (the reads of DataLoader workers count in the workers)."""
        return self.rows.tally

    # ----- sizes -------------------------------------------------------------------------
    def token_shares(self, epoch: int = 0) -> np.ndarray:
        """Share of tokens each stream contributes to `epoch` (of `lengths_column`)."""
        from streaming.dataset.token_mix import token_shares

        return token_shares(self, epoch)

    @property
    def data_parallel_ranks(self) -> int:
        return self.world.data_parallel_ranks

    def __len__(self) -> int:
        """Samples this rank yields per epoch (all of it on one rank; with several ranks the
        epoch padded to a multiple of the rank count, divided over them)."""
        self.session.run.check_world()  # a trainer sizes its epoch with len: fail before that
        return self.session.plans.samples_per_rank()

    # ----- random access -----------------------------------------------------------------
    def get_item(self, sample_id: int) -> dict[str, Any]:
        """The decoded sample with global id `sample_id` (negative counts from the end)."""
        return self.rows.get(sample_id)

    def __getitem__(self, index: Any) -> Any:
        """One sample for an int; a list of samples for a slice or an array of ids."""
        if isinstance(index, int | np.integer):
            return self.get_item(int(index))
        return [self.get_item(i) for i in ids_of(index, self.num_samples)]

    def _overridden(self) -> bool:
        cls = type(self)
        return (cls.__getitem__ is not StreamingDataset.__getitem__
                or cls.get_item is not StreamingDataset.get_item)

    # ----- iteration ---------------------------------------------------------------------
    def worker_sample_ids(self, epoch: int, sample_in_epoch: int,
                          world: World | None = None) -> np.ndarray:
        """This worker's planned global ids for an epoch (-1 marks padding)."""
        return self.session.plans.worker_sample_ids(epoch, sample_in_epoch, world)

    def rank_sample_ids(self, epoch: int) -> np.ndarray:
        """This rank's planned global ids for `epoch` from its start, as one DataLoader worker
        would read them (-1 marks padding)."""
        return self.session.plans.worker_sample_ids(epoch, 0, self.session.plans.rank_world())

    def check_cache_for_workers(self, num_workers: int) -> None:
        """Refuse (CacheLimitError naming the minimum) a cache_limit the node's plan cannot run
        in once each rank reads through `num_workers` DataLoader workers: the check at
        construction counts the workers the dataset's world states (one per rank unless a
        world was given). StreamingDataLoader calls this when it is built.

        Args:
            num_workers: DataLoader worker processes per rank.
        """
        base = self.world
        if self.cache is None or self.cache.node_limit() is None or \
                num_workers <= base.workers_per_rank:
            return
        world = dataclasses.replace(base, workers_per_rank=num_workers, worker=0)
        plan = self.session.plans.node_plan(self.config, world, 0, 0)
        self.cache.check_plan(plan.ids, self.catalog.locator.shard_starts, plan.batch_size)

    def read_samples(self, ids: np.ndarray, epoch: int = 0) -> Iterator[dict[str, Any]]:
        """The samples of planned `ids` (of epoch `epoch`) in order (-1 padding skipped)."""
        for chunk in self._sample_chunks(ids, epoch=epoch):
            yield from chunk

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.session.run.note_pending()
        return self._samples_of_iteration()

    def _samples_of_iteration(self) -> Iterator[dict[str, Any]]:
        with self.session.run.iteration() as it:
            ids = self._planned_ids(it)
            chunks = self._sample_chunks(ids, self._read_size(1), epoch=it.start.epoch)
            watch = self._watch
            watch.begin(ids)
            for chunk in watch.timed(chunks):
                for sample in chunk:
                    it.count()
                    yield sample

    def _sample_chunks(self, ids: np.ndarray, size: ReadSize | None = None, *, epoch: int = 0
                       ) -> Iterator[list[Any]]:
        """The samples of planned `ids` (of epoch `epoch`), read in chunks by the row reader,
        or, when a subclass overrides `__getitem__` / `get_item`, through that override, one id
        at a time (the row reader still prepares and opens their shards ahead)."""
        size = size or DEFAULT_SIZE
        if not self._overridden():
            return self.rows.chunks(ids, size, epoch=epoch)
        return self._chunks_by_item(self.rows.id_chunks(ids, size, epoch=epoch))

    def _chunks_by_item(self, chunks: Generator[list[int], None, None]
                        ) -> Iterator[list[Any]]:
        try:
            for chunk in chunks:
                yield [self[i] for i in chunk]
        finally:
            chunks.close()  # ends the row reader's pass now, not when it is collected

    def batches_supported(self) -> bool:
        """Whether `iter_batches` reads what `__iter__` would (no subclass override)."""
        cls = type(self)
        return (cls.__iter__ is StreamingDataset.__iter__ and not self._overridden()
                and self.catalog.same_schema())

    def iter_batches(self, batch_size: int, drop_last: bool = False, *, numpy: bool = False,
                     views: bool = False, handed_on: bool = False) -> Iterator[dict[str, Any]]:
        """This worker's share of the epoch as the batches a DataLoader would collate from
        `__iter__` (`streaming.loader.default_collate.collate`), read column by column
        (StreamingDataLoader's fast path). With `views`, `bytes` values are memoryviews of the
        read buffer (a Parquet stream's: of its decoded row groups, read-only), for a consumer
        that copies each batch before asking for the next (the worker transport). With
        `handed_on`, DataLoader workers go on with the iteration after this read: when it ends,
        the shards it would read next stay wanted in the node's cache until
        `withdraw_horizon()`."""
        with self.session.run.iteration() as it:
            ids = self._planned_ids(it)
            names = self.catalog.codecs[0].column_names
            chunks = self.rows.chunks(ids, size=self._read_size(batch_size, batch_size),
                                      columns=True, views=views, handed_on=handed_on,
                                      epoch=it.start.epoch)
            for columns in chunks:
                for lo in range(0, len(columns[0]) if columns else 0, batch_size):
                    part = [values[lo:lo + batch_size] for values in columns]
                    if drop_last and len(part[0]) < batch_size:
                        break
                    it.count(len(part[0]))
                    yield {name: collate_column(values, numpy=numpy)
                           for name, values in zip(names, part)}

    def _read_size(self, multiple: int, first: int = FIRST_READ) -> ReadSize:
        world = self.session.plans.worker_world()
        return self.rows.read_size(multiple, world.ranks_per_node * world.workers_per_rank,
                                   first)

    def _planned_ids(self, it: Iteration) -> np.ndarray:
        """The planned ids of iteration `it` from where it starts."""
        with self.session.run.failing_on_error():
            return self.session.plans.iteration_ids(it.start, it.world)

    # ----- resumption --------------------------------------------------------------------
    def state_dict(self, num_samples: int | None = None, from_beginning: bool = False
                   ) -> dict[str, Any]:
        """The resumption state in one of two forms: after `num_samples` global samples
        (`state_after`, the reference's and Composer's form) or, without `num_samples`, after
        what this process's iteration yielded (`iteration_state`, torchdata's form).

        Args:
            num_samples: Global samples of the current epoch a loader counted, or None.
            from_beginning: Count them from the epoch's first sample, not from where its
                iteration started.
        """
        return self.session.resume.state_dict(num_samples, from_beginning)

    def state_after(self, num_samples: int, *, from_beginning: bool = False) -> dict[str, Any]:
        """The state after `num_samples` global samples of the current epoch, counted from
        where it started (or its first sample with `from_beginning`).

        Args:
            num_samples: Global samples of the current epoch a loader counted.
            from_beginning: Count them from the epoch's first sample.
        """
        return self.session.resume.state_after(num_samples, from_beginning=from_beginning)

    def iteration_state(self) -> dict[str, Any]:
        """The state after what this process's iteration yielded (inside a DataLoader worker,
        the worker's own; see docs/resumption.md)."""
        return self.session.resume.iteration_state()

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Continue from `obj` at the next iteration (also mid-run and on another topology).
        StateMismatchError if `obj` came from a differently configured dataset, unless
        `strict=False`."""
        self.session.resume.load_state_dict(obj, strict)

    # ----- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        """Release shared memory and open shards (also done at garbage collection / exit)."""
        self.rows.close()
        self.session.close()


def _copied_to_cache(streams: list[Stream], limit: CacheLimit | None) -> list[Stream]:
    """`streams`, each local-only compressed one set to decompress into a cache folder when it
    must (see `Stream.copy_to_cache`)."""
    for stream in streams:
        stream.copy_to_cache(limit)
    return streams


def _refuse_packing(cls: type, packing: bool) -> None:
    """ArgumentError for `packing=True`, naming the class that packs (the argument stays in the
    signature, so that a config filtered by the signature cannot silently drop it)."""
    if packing:
        raise ArgumentError(f"{cls.__name__} does not pack: build packed batches with "
                            "streaming.PackedStreamingDataset(..., packing_length=...), which "
                            "takes these same arguments (docs/packing.md)")
