"""StreamingDataset: streams of MDS shards, planned per epoch over nodes, ranks and DataLoader
workers, read zero-copy from a node-local cache, resumable mid-epoch."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from torch.utils.data import IterableDataset

from streaming.cache.limit import check_cache_limit
from streaming.cache.prepare import ShardPreparer, ShardTable
from streaming.cache.split_meta import prepare_meta_files
from streaming.collate import collate_column
from streaming.coord.names import Namespace
from streaming.coord.node import NodeCoordinator
from streaming.coord.plans import PlanBoard
from streaming.coord.shm import clean_stale_shared_memory
from streaming.dataset_compat import ReferenceAPI
from streaming.errors import PlanError, StateMismatchError
from streaming.format.index import read_index
from streaming.format.local_files import check_local_shards
from streaming.format.shard import ShardReader
from streaming.format.split import open_shard
from streaming.plan import PlanConfig, World, plan_node
from streaming.read.epochs import EpochCounter, IterationStart
from streaming.read.iterate import iter_chunks, read_size
from streaming.read.open_shards import OpenShards
from streaming.read.source import ShardSource, shard_source
from streaming.read.spanner import Spanner
from streaming.state import ResumeState, WorkerPosition
from streaming.stream import Stream, stream_class
from streaming.util.units import parse_bytes
from streaming.util.worker import settle_worker
from streaming.world_detect import check_unchanged, detect_world, worker_slot

if TYPE_CHECKING:
    from streaming.cache.engine import CacheEngine
    from streaming.cache.stats import CacheStats

logger = logging.getLogger(__name__)

__all__ = ["StreamingDataset", "clean_stale_shared_memory"]

JOIN_TIMEOUT = 120.0  # seconds a local rank waits for its node's leader at start-up


class StreamingDataset(ReferenceAPI, IterableDataset):
    """An iterable (and randomly indexable) dataset over one or more MDS streams.

    Iteration yields this rank's share of each epoch in the planned global order; `ds[i]` reads
    any sample by global id. See docs/dataset.md for every argument.

    `packing=True` (with `packing_length`, `packing_strategy`, `filter_overlong`, ...) builds a
    `streaming.packing.streaming.PackedStreamingDataset`, which yields packed batches instead.
    """

    def __new__(cls, *args: Any, packing: bool = False, **kwargs: Any) -> StreamingDataset:
        if packing and cls is StreamingDataset:
            from streaming.packing.streaming import PackedStreamingDataset

            return super().__new__(PackedStreamingDataset)
        return super().__new__(cls)

    def __init__(
        self,
        *,
        streams: Sequence[Stream] | None = None,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        epoch_size: int | str | None = None,
        predownload: int | None = None,
        cache_limit: int | str | None = None,
        sampling_method: str = "balanced",
        sampling_granularity: int = 1,
        partition_algo: str = "relaxed",
        num_canonical_nodes: int | None = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        shuffle_algo: str = "py1e",
        shuffle_seed: int = 9176,
        shuffle_block_size: int | None = None,
        batching_method: str = "random",
        allow_unsafe_types: bool = False,
        replication: int | None = None,
        download_retry: int = 2,
        download_timeout: float = 60,
        validate_hash: str | None = None,
        keep_zip: bool = False,
        stream_name: str = "stream",
        stream_config: dict[str, Any] | None = None,
        world: World | None = None,
        mix_unit: str = "samples",
        lengths_column: str = "tokens",
        packing: bool = False,
    ) -> None:
        if packing:  # reached only by subclasses: StreamingDataset(packing=True) is redirected
            raise TypeError(f"{type(self).__name__} does not pack; packing=True works with "
                            "StreamingDataset(...) or PackedStreamingDataset")
        self.streams = _build_streams(streams, remote, local, split, stream_name, stream_config)
        for stream in self.streams:
            stream.apply_defaults(download_retry=download_retry, download_timeout=download_timeout,
                                  validate_hash=validate_hash, keep_zip=keep_zip)
        self.lengths_column = lengths_column
        if mix_unit != "samples":  # proportions are token shares: see docs/packing.md
            from streaming.packing.token_mix import mix_by_tokens

            self.streams, epoch_size = mix_by_tokens(self.streams, mix_unit, lengths_column,
                                                     epoch_size)
        if predownload is not None and predownload < 0:
            raise PlanError(f"predownload must be >= 0, got {predownload}")
        if predownload is not None and batch_size is not None and predownload < batch_size:
            warnings.warn(f"predownload={predownload} is smaller than batch_size={batch_size}: "
                          "batches then wait for downloads; set predownload to at least "
                          "batch_size", stacklevel=2)
        self.predownload = predownload if predownload is not None else 8 * (batch_size or 8)
        if cache_limit is not None:
            check_cache_limit(cache_limit)
        self.cache_limit = cache_limit
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.shuffle_seed = shuffle_seed
        self.allow_unsafe_types = allow_unsafe_types
        self.replication = replication or 1
        self._explicit_world = world
        self.world = world or detect_world(workers_per_rank=1, replication=self.replication)

        indexes = [read_index(stream.index_file()) for stream in self.streams]
        prepare_meta_files(self.streams, indexes)  # text-format (split) shards only
        for stream, index in zip(self.streams, indexes):
            if stream.remote_dir is None:  # read in place: nothing can fetch a bad shard again
                check_local_shards(index)
        self._codecs = [ix.codec(allow_unsafe_types=allow_unsafe_types) for ix in indexes]
        self.shards_per_stream = np.array([ix.num_shards for ix in indexes], np.int64)
        self.samples_per_shard = np.concatenate([ix.samples_per_shard for ix in indexes]
                                                ).astype(np.int64)
        self.stream_per_shard = np.repeat(np.arange(len(indexes)), self.shards_per_stream)
        self.shard_offset_per_stream = np.concatenate(
            [[0], np.cumsum(self.shards_per_stream)[:-1]]).astype(np.int64)
        self.samples_per_stream = np.array([ix.num_samples for ix in indexes], np.int64)
        self.sample_offset_per_stream = np.concatenate(
            [[0], np.cumsum(self.samples_per_stream)[:-1]]).astype(np.int64)
        self.num_samples = int(self.samples_per_stream.sum())
        self.spanner = Spanner(self.samples_per_shard)
        self.preparer = ShardPreparer(self.streams, ShardTable.from_indexes(indexes))
        raw_bytes = float(np.sum(self.preparer.table.raw_bytes))
        self._mean_sample_bytes = raw_bytes / max(self.num_samples, 1)

        # An unweighted stream beside weighted ones counts as repeat=1 (docs/mixing.md).
        weighted = any(s.weighted for s in self.streams)
        self.config = PlanConfig(
            samples_per_shard=self.samples_per_shard,
            shards_per_stream=self.shards_per_stream,
            weights=tuple(s.weights for s in self.streams) if weighted else (),
            epoch_size=epoch_size, batch_size=batch_size, shuffle=shuffle,
            shuffle_algo=shuffle_algo, shuffle_seed=shuffle_seed,
            shuffle_block_size=shuffle_block_size, num_canonical_nodes=num_canonical_nodes,
            partition_algo=partition_algo, batching_method=batching_method,
            sampling_method=sampling_method, sampling_granularity=sampling_granularity)
        self._read_shard = 0  # samples of a typical shard, when reads are sized to it (0: not)
        if cache_limit is not None:
            self.config = self._fit_cache(parse_bytes(cache_limit))
        self._fill_stream_weights()  # Stream.proportion/repeat/choose, as the reference
        self._readers = OpenShards(self._open_prepared)
        self._lengths: dict[tuple, int] = {}
        self._yielded = 0
        # This process's iteration, for torchdata's state_dict(): where it started, whether a
        # new one was asked for (iter) but not begun, whether it ran to its end.
        self._start: IterationStart | None = None
        self._pending = False
        self._ended = False

        salt = self.config.fingerprint()
        self._namespace = Namespace.for_job([s.local_dir for s in self.streams], salt=salt)
        self._node = NodeCoordinator.join(self._namespace, timeout=JOIN_TIMEOUT)
        rank = self.world.rank_in_node
        self._epochs = EpochCounter(self._namespace.name(f"e{rank}"),
                                    self._namespace.name(f"e{rank}k"), create=True)
        self._board = PlanBoard(self._namespace)
        self.cache = self._start_cache(cache_limit)
        self.source: ShardSource = shard_source(self.cache, self.preparer, self.predownload)

    def _fit_cache(self, limit: int) -> PlanConfig:
        """The plan config with a shuffle the cache can hold (the defaults, when they fit): a
        block shuffle reads its block's shards at once and py1s/py2s one or two shards per
        canonical node, and shards evicted while still in use are downloaded again and again.
        Uses only the config and the index, so every node picks the same. Where the shuffle
        fits, reads are sized to half a shard of the node's order (`_read_shard`); where it
        cannot (naive, or the user's own block or node count), reads stay large, which pins
        each shard once per read."""
        from streaming.cache.engine import shard_footprint
        from streaming.cache.fit import BLOCK_SHUFFLES, SHARD_SHUFFLES, typical_samples

        cfg = self.config
        footprint = shard_footprint(self.preparer.table, self.streams)
        self._read_shard = typical_samples(footprint, self.samples_per_shard)
        if not cfg.shuffle:
            return cfg  # shards in order: one or two in use at a time
        if cfg.shuffle_algo in BLOCK_SHUFFLES:
            return self._block_within(limit, footprint)
        if cfg.shuffle_algo in SHARD_SHUFFLES:
            return self._canonical_within(limit, footprint)
        self._read_shard = 0  # naive: samples from anywhere in the epoch
        return cfg

    def _block_within(self, limit: int, footprint: Any) -> PlanConfig:
        from streaming.cache.fit import block_for_limit

        cfg = self.config
        canonical = cfg.canonical_nodes(self.world)
        default = cfg.block_size(canonical)
        sequences = -(-canonical // self.world.num_groups)  # canonical nodes one node reads
        fit = block_for_limit(limit, footprint, self.samples_per_shard, default,
                              cfg.shuffle_algo, sequences)
        return self._keep_or_fit(
            "shuffle_block_size", fit, default,
            too_big=f"shuffle_block_size={cfg.shuffle_block_size} is more than "
                    f"cache_limit={self.cache_limit} can hold ({fit} samples): shards evicted "
                    "within a block are downloaded again, several times per epoch each (4.5x "
                    "for a whole-dataset block at a 25% limit); a block of at most "
                    f"{fit} samples, or no shuffle_block_size, avoids it",
            fitted=f"cache_limit={self.cache_limit} holds only part of a shuffle block: "
                   f"shuffling over blocks of {fit} samples instead of {default}, so shards "
                   "are not fetched again within a block (pass shuffle_block_size to choose)")

    def _canonical_within(self, limit: int, footprint: Any) -> PlanConfig:
        from streaming.cache.fit import canonical_for_limit

        cfg = self.config
        nodes = self.world.num_groups
        default = cfg.canonical_nodes(self.world)
        fit = canonical_for_limit(limit, footprint, default, nodes, cfg.shuffle_algo)
        return self._keep_or_fit(
            "num_canonical_nodes", fit, default,
            too_big=f"num_canonical_nodes={cfg.num_canonical_nodes} with shuffle_algo="
                    f"{cfg.shuffle_algo!r} reads more shards at once than cache_limit="
                    f"{self.cache_limit} holds: shards evicted while still in use are "
                    f"downloaded again (2x for 64 canonical nodes at a 25% limit); at most "
                    f"{fit} avoids it",
            fitted=f"cache_limit={self.cache_limit} holds the shards of only {fit} of {default} "
                   f"canonical nodes at once: {cfg.shuffle_algo} interleaves {fit} instead, so "
                   "shards are not fetched again while in use (pass num_canonical_nodes to "
                   "choose)")

    def _keep_or_fit(self, field: str, fit: int, default: int, *, too_big: str,
                     fitted: str) -> PlanConfig:
        """The config with `field` set to `fit` when the user left it unset and the default
        is more than the cache holds (warning `fitted`); a value the user set is kept, with
        the `too_big` warning and large reads when it is more than `fit`."""
        given = getattr(self.config, field)
        if given is not None:
            if given > fit:
                self._read_shard = 0
                logger.warning(too_big)
            return self.config
        if fit >= default:
            return self.config
        logger.warning(fitted)
        return dataclasses.replace(self.config, **{field: fit})

    def _start_cache(self, cache_limit: int | str | None) -> CacheEngine | None:
        """The node-shared cache engine over the remote streams' folders (None when every
        stream is local-only); a cache_limit the epoch-0 node plan cannot run in is refused
        here, with the minimum in the CacheLimitError."""
        if all(stream.remote_dir is None for stream in self.streams):
            return None
        from streaming.cache.engine import CacheEngine  # local-only datasets never load it

        engine = CacheEngine(self.preparer, cache_limit=cache_limit,
                             predownload=self.predownload, flag=self._node).attach()
        if engine.effective_limit() is not None:
            try:
                engine.check_plan(plan_node(self.config, self.world, 0, 0).ids,
                                  self.spanner.shard_starts)
            except BaseException:
                engine.close()
                self.close()
                raise
        return engine

    def cache_stats(self) -> CacheStats:
        """What the node's shard cache did so far: hits, misses, downloads, bytes downloaded,
        evictions and seconds readers waited (all zero when every stream is local-only)."""
        from streaming.cache.stats import CacheStats

        return CacheStats() if self.cache is None else self.cache.stats()

    def _limits(self) -> bool:
        """Whether some shards are read under a cache_limit."""
        return self.cache is not None and self.cache.effective_limit() is not None

    def _limited(self, shard: int) -> bool:
        """Whether `shard` is cached under a cache_limit (then read under a pin, never kept
        open: an open file of an evicted shard would keep its blocks)."""
        cache = self.cache
        return (cache is not None and bool(cache.cached[shard])
                and cache.effective_limit() is not None)

    # ----- sizes -------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of unique samples over every stream (what `ds[i]` can address)."""
        return self.num_samples

    @property
    def epoch_size(self) -> int:
        """Samples in one epoch over all ranks, after mixing (before padding to whole batches)."""
        return int(self.config.epoch_size)

    def token_shares(self, epoch: int = 0) -> np.ndarray:
        """Share of tokens each stream contributes to `epoch` (of `lengths_column`)."""
        from streaming.packing.token_mix import token_shares

        return token_shares(self, epoch)

    @property
    def data_parallel_ranks(self) -> int:
        return self.world.data_parallel_ranks

    def __len__(self) -> int:
        """Samples this rank yields per epoch (all of it on one rank; with several ranks the
        epoch padded to a multiple of the rank count, divided over them)."""
        if self._explicit_world is None:
            check_unchanged(self.world)  # a trainer sizes its epoch with len: fail before that
        return self._samples_per_rank(self._config_now())

    def _samples_per_rank(self, cfg: PlanConfig) -> int:
        key = (cfg.num_canonical_nodes, cfg.shuffle_seed)
        if key not in self._lengths:
            self._lengths[key] = int(plan_node(cfg, self.world, 0, 0).samples_per_rank)
        return self._lengths[key]

    # ----- random access -----------------------------------------------------------------
    def _reader(self, shard: int) -> ShardReader:
        """An open reader of `shard` (at most `OpenShards.capacity` stay open at once)."""
        return self._readers.get(shard)

    def _open_prepared(self, shard: int) -> ShardReader:
        return self._open_file(shard, self._prepare(shard))

    def _open_file(self, shard: int, path: Any) -> ShardReader:
        stream = int(self.stream_per_shard[shard])
        return open_shard(path, self._codecs[stream],
                           expected_samples=int(self.samples_per_shard[shard]),
                           expected_bytes=int(self.preparer.table.raw_bytes[shard]))

    def _prepare(self, shard: int) -> Any:
        return self.preparer.prepare(shard) if self.cache is None else self.cache.prepare(shard)

    def prepare_shard(self, shard_id: int) -> None:
        """Make shard `shard_id` (global over streams) ready on this node."""
        self._prepare(int(shard_id))

    def get_item(self, sample_id: int) -> dict[str, Any]:
        """The decoded sample with global id `sample_id` (negative counts from the end)."""
        shard, row = self.spanner[sample_id]
        if not self._limited(shard):
            return self._reader(shard).get(row)
        path = self.cache.acquire(shard)  # type: ignore[union-attr]
        try:
            with self._open_file(shard, path) as reader:
                return reader.get_many([row], copy=True)[0]  # no view of the file outlives it
        finally:
            self.cache.release(shard)  # type: ignore[union-attr]

    def __getitem__(self, index: Any) -> Any:
        """One sample for an int; a list of samples for a slice or an array of ids."""
        if isinstance(index, int | np.integer):
            return self.get_item(int(index))
        if isinstance(index, slice):
            return [self.get_item(i) for i in range(*index.indices(self.num_samples))]
        ids = np.asarray(index)
        if ids.dtype == bool:
            ids = np.flatnonzero(ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"index must be an int, slice or 1-d integer array, got {index!r}")
        return [self.get_item(int(i)) for i in ids]

    def _overridden(self) -> bool:
        cls = type(self)
        return (cls.__getitem__ is not StreamingDataset.__getitem__
                or cls.get_item is not StreamingDataset.get_item)

    # ----- iteration ---------------------------------------------------------------------
    def _config_now(self) -> PlanConfig:
        """The plan config with the canonical node count / seed a loaded state imposed."""
        ncn, seed = self._epochs.overrides()
        if ncn <= 0:
            return self.config
        if (ncn, seed) == (self.config.num_canonical_nodes, self.config.shuffle_seed):
            return self.config
        return dataclasses.replace(self.config, num_canonical_nodes=ncn, shuffle_seed=seed)

    def _worker_world(self) -> World:
        info = worker_slot()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        base = self.world
        return World(base.num_nodes, base.ranks_per_node, workers, base.node,
                     base.rank_in_node, worker, base.replication)

    def worker_sample_ids(self, epoch: int, sample_in_epoch: int,
                          world: World | None = None) -> np.ndarray:
        """This worker's planned global ids for an epoch (-1 marks padding)."""
        world = world or self._worker_world()
        cfg = self._config_now()
        if world.ranks_per_node == 1 and world.workers_per_rank == 1:
            return plan_node(cfg, world, epoch, sample_in_epoch).worker_ids(0, 0)
        key = (f"{cfg.fingerprint()}|{cfg.num_canonical_nodes}|{cfg.shuffle_seed}|{epoch}|"
               f"{sample_in_epoch}|{world.num_nodes}|{world.ranks_per_node}|"
               f"{world.workers_per_rank}|{world.node}")
        return self._board.slice(key, lambda: plan_node(cfg, world, epoch, sample_in_epoch).ids,
                                 world.rank_in_node, world.worker)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self._pending = True  # noted now: torchdata asks for the state before the first sample
        return self._samples_of_iteration()

    def _samples_of_iteration(self) -> Iterator[dict[str, Any]]:
        world, ids = self._begin()
        item = self.__getitem__ if self._overridden() else None
        chunks = iter_chunks(ids, self.spanner.locate, self._reader, self.source, item,
                             chunk=self._read_rows(1), open_file=self._open_file)
        self._yielded = 0
        try:
            for chunk in chunks:
                for sample in chunk:
                    self._yielded += 1
                    yield sample
        except Exception as exc:
            self._fail(world, exc)
            raise
        self._ended = True

    def batches_supported(self) -> bool:
        """Whether `iter_batches` reads what `__iter__` would (no subclass override)."""
        cls = type(self)
        same_schema = all(codec == self._codecs[0] for codec in self._codecs)
        return cls.__iter__ is StreamingDataset.__iter__ and not self._overridden() and same_schema

    def iter_batches(self, batch_size: int, drop_last: bool = False, *, numpy: bool = False,
                     views: bool = False) -> Iterator[dict[str, Any]]:
        """This worker's share of the epoch as collated batches of `batch_size`: the batches a
        DataLoader would build from `__iter__` with `streaming.collate.collate` (`numpy` as
        there), read column by column without per-sample dicts (StreamingDataLoader's fast
        path). With `views`, `bytes` values are memoryviews of the read buffer instead of
        copies: for a consumer that copies each batch before asking for the next (the worker
        transport), since a view keeps a whole read's buffer alive."""
        world, ids = self._begin()
        names = self._codecs[0].column_names
        rows = self._read_rows(batch_size)
        chunks = iter_chunks(ids, self.spanner.locate, self._reader, self.source,
                             chunk=rows, first=batch_size, columns=True, views=views,
                             open_file=self._open_file)
        self._yielded = 0
        try:
            for columns in chunks:
                for lo in range(0, len(columns[0]) if columns else 0, batch_size):
                    part = [values[lo:lo + batch_size] for values in columns]
                    size = len(part[0])
                    if drop_last and size < batch_size:
                        break
                    self._yielded += size
                    yield {name: collate_column(values, numpy=numpy)
                           for name, values in zip(names, part)}
        except Exception as exc:
            self._fail(world, exc)
            raise

    def _read_rows(self, multiple: int) -> int:
        """Rows per vectorised read, a multiple of `multiple` (see `read_size`); under a
        cache_limit whose block fits, at most half a shard of the node's order, so the shards
        one read touches stay few."""
        if not self._limits():
            return read_size(self._mean_sample_bytes, multiple)
        if not self._read_shard:
            return read_size(self._mean_sample_bytes, multiple, limited=True)
        world = self._worker_world()  # its readers take turns along the node's order
        readers = max(world.ranks_per_node * world.workers_per_rank, 1)
        rows = min(read_size(self._mean_sample_bytes), max(self._read_shard // (2 * readers), 1))
        return max(rows // multiple, 1) * multiple

    def _begin(self) -> tuple[World, np.ndarray]:
        """Register this worker's iteration and fetch its planned ids."""
        world = self._worker_world()
        if self._explicit_world is None:
            check_unchanged(self.world)
        settle_worker()
        start = self._epochs.begin_worker(world.worker, world.workers_per_rank)
        self._node.check(start.epoch)
        self._start, self._pending, self._ended, self._yielded = start, False, False, 0
        with self._node.failing_on_error():
            ids = self.worker_sample_ids(start.epoch, start.sample_in_epoch, world)
        return world, ids[start.skip:]

    def _fail(self, world: World, exc: BaseException) -> None:
        self._node.fail_with(exc, f"rank {world.rank} worker {world.worker}")

    # ----- resumption --------------------------------------------------------------------
    def state_dict(self, num_samples: int | None = None, from_beginning: bool = False
                   ) -> dict[str, Any]:
        """Resumption state after `num_samples` global samples of the current epoch.

        `from_beginning=False` counts from where the current epoch started (a resume point),
        True from the epoch's first sample. Without `num_samples` (torchdata's
        StatefulDataLoader protocol) it is the state of this process's iteration: see
        `_iteration_state`.
        """
        if num_samples is None:
            return self._iteration_state()
        cfg = self._config_now()
        epoch, offset = self._epochs.current()
        sample = num_samples if from_beginning else offset + num_samples
        if sample >= self._samples_per_rank(cfg) * self.world.data_parallel_ranks:
            epoch, sample = epoch + 1, 0
        return ResumeState(
            epoch=epoch, sample_in_epoch=int(sample),
            num_canonical_nodes=int(cfg.canonical_nodes(self.world)),
            shuffle_seed=int(cfg.shuffle_seed), fingerprint=self._fingerprint(cfg),
            initial_physical_nodes=self.world.num_nodes).to_dict()

    def _iteration_state(self) -> dict[str, Any]:
        """The state after what this process's iteration has yielded (torchdata's protocol).

        In the training process (no DataLoader workers) that is the rank's position. Inside a
        worker it is the worker's own: the rank-wide point its iteration started from plus
        `worker` (a WorkerPosition), since torchdata saves every worker's state as of the last
        batch the trainer got from it and hands each worker back its own. A state taken after
        the last sample but before the iteration saw its end points at that end, so the
        resumed iteration ends at once, as the uninterrupted one did.
        """
        slot = worker_slot()
        worker, workers = (slot.id, slot.num_workers) if slot is not None else (0, 1)
        if self._start is None or self._pending:
            start = self._epochs.peek(worker, workers)
            done, ended = start.skip, start.ended
        else:
            start, done, ended = self._start, self._start.skip + self._yielded, self._ended
        cfg = self._config_now()
        dp = self.world.data_parallel_ranks
        epoch, sample = start.epoch, start.sample_in_epoch
        if slot is None:
            sample += done * dp
            if ended:
                epoch, sample = epoch + 1, 0
        state = ResumeState(
            epoch=epoch, sample_in_epoch=int(sample),
            num_canonical_nodes=int(cfg.canonical_nodes(self.world)),
            shuffle_seed=int(cfg.shuffle_seed), fingerprint=self._fingerprint(cfg),
            initial_physical_nodes=self.world.num_nodes).to_dict()
        if slot is not None:
            state["worker"] = WorkerPosition(worker, workers, done, ended, self.world.num_nodes,
                                             self.world.ranks_per_node).to_dict()
        return state

    def _fingerprint(self, cfg: PlanConfig) -> str:
        """The config's fingerprint minus what may change on resume: the canonical node count
        (adopted from the state) and the per-device batch size (elastic topologies change it)."""
        return dataclasses.replace(cfg, num_canonical_nodes=None, batch_size=1).fingerprint()

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Continue from `obj` at the next iteration (also mid-run and on another topology).

        Raises StateMismatchError if `obj` came from a differently configured dataset, unless
        `strict=False`.
        """
        state = ResumeState.from_dict(obj)
        seed = state.shuffle_seed if state.shuffle_seed >= 0 else self.config.shuffle_seed
        if strict and seed != self.config.shuffle_seed:
            raise StateMismatchError(
                f"resumption state has shuffle_seed={seed}, this dataset has "
                f"{self.config.shuffle_seed}; pass strict=False to resume anyway")
        state.check(self._fingerprint(self.config), strict=strict)
        ncn = state.num_canonical_nodes or int(self.config.canonical_nodes(self.world))
        self._start, self._pending = None, False
        if "worker" not in obj:
            self._epochs.set_resume(state.epoch, state.sample_in_epoch, ncn, seed)
            return
        mine = WorkerPosition.from_dict(obj["worker"])
        slot = worker_slot()
        if slot is None or (slot.id, slot.num_workers) != (mine.worker, mine.num_workers):
            where = "the training process" if slot is None else \
                f"worker {slot.id} of {slot.num_workers}"
            raise StateMismatchError(
                f"this state was taken by DataLoader worker {mine.worker} of "
                f"{mine.num_workers} (torchdata's StatefulDataLoader saves one per worker) and "
                f"is being loaded in {where}: load the StatefulDataLoader's own state_dict() "
                "into a StatefulDataLoader with the same num_workers, or use "
                "StreamingDataLoader, whose state is the rank's")
        shape = (self.world.num_nodes, self.world.ranks_per_node)
        if (mine.num_nodes, mine.ranks_per_node) != shape:
            raise StateMismatchError(
                f"this per-worker state (torchdata's StatefulDataLoader) was taken on "
                f"{mine.num_nodes} node(s) of {mine.ranks_per_node} rank(s); this job has "
                f"{shape[0]} of {shape[1]}: per-worker positions resume on the same shape only "
                "(StreamingDataLoader's rank-wide state resumes on any)")
        self._epochs.set_worker_resume(state.epoch, state.sample_in_epoch, ncn, seed,
                                       worker=mine.worker, num_workers=mine.num_workers,
                                       skip=mine.samples, ended=mine.ended)

    # ----- lifecycle ---------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()  # OpenShards pickles without its open readers

    def close(self) -> None:
        """Release shared memory and open shards (also done at garbage collection / exit)."""
        self._readers.close()
        if getattr(self, "cache", None) is not None:
            self.cache.close()
        self._board.close()
        self._epochs.close()
        self._node.close()


def _build_streams(streams: Sequence[Stream] | None, remote: str | None, local: str | None,
                   split: str | None, stream_name: str,
                   stream_config: dict[str, Any] | None) -> list[Stream]:
    if streams is not None:
        if remote is not None or local is not None:
            raise PlanError("pass either `streams` or `remote`/`local`, not both")
        streams = list(streams)
        if not streams:
            raise PlanError("`streams` is empty")
        for s in streams:
            if not isinstance(s, Stream):
                raise PlanError(f"`streams` must hold Stream objects, got {type(s).__name__}")
        return streams
    if remote is None and local is None:
        raise PlanError("StreamingDataset needs `streams`, `remote` or `local`")
    cls = stream_class(stream_name)
    return [cls(remote=remote, local=local, split=split, **(stream_config or {}))]
