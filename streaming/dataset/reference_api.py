"""The reference implementation's public StreamingDataset surface, as a mixin over ours:
`shards`, `num_shards`, `evict_shard`, `evict_coldest_shard`, `cache_usage`, `next_epoch`,
`resample_streams` and the resolved configuration attributes (docs/from-reference-api.md).

Everything is computed from the dataset's parts (its catalog, plan config, rows and session);
nothing here keeps state of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streaming.errors import ArgumentError, CacheLimitError

if TYPE_CHECKING:
    from streaming.cache.engine.cache_engine import CacheEngine
    from streaming.cache.prepare.preparer import ShardPreparer
    from streaming.dataset.catalog import Catalog
    from streaming.dataset.session import Session
    from streaming.plan import PlanConfig, World
    from streaming.read.row_reader import RowReader
    from streaming.read.sample_locator import SampleLocator
    from streaming.stream import Stream


@dataclass(frozen=True)
class FileInfo:
    """One file of a shard as index.json records it."""

    basename: str
    bytes: int
    hashes: dict[str, str]


@dataclass(frozen=True)
class ShardInfo:
    """One shard of the dataset (global id over every stream), as `dataset.shards` lists it."""

    shard_id: int
    stream_id: int
    samples: int
    format: str
    compression: str | None
    raw_data: FileInfo
    zip_data: FileInfo | None

    def __len__(self) -> int:
        return self.samples

    def get_raw_size(self) -> int:
        """Bytes of the decompressed shard file."""
        return self.raw_data.bytes

    def get_zip_size(self) -> int | None:
        """Bytes of the compressed file, or None when the shard is stored raw."""
        return None if self.zip_data is None else self.zip_data.bytes

    def get_max_size(self) -> int:
        """Bytes on disk while both files exist (during decompression)."""
        return self.raw_data.bytes + (self.zip_data.bytes if self.zip_data else 0)

    def get_persistent_size(self, keep_zip: bool) -> int:
        """Bytes kept once prepared: the raw file, plus the zip with `keep_zip`."""
        return self.get_max_size() if keep_zip else self.raw_data.bytes


def _resolved(name: str, compute: Any) -> property:
    """A config attribute read from the plan (so a resumed run's values show), that an
    assignment in a subclass or in `__init__` may still set for the instance."""
    key = f"_assigned_{name}"

    def get(self: Any) -> Any:
        if key in self.__dict__:
            return self.__dict__[key]
        return compute(self)

    def put(self: Any, value: Any) -> None:
        self.__dict__[key] = value

    return property(get, put, doc=f"`{name}` as this dataset plans with it.")


class ReferenceAPI:
    """Mixin giving StreamingDataset the reference implementation's attributes and methods."""

    # Provided by StreamingDataset.
    cache: CacheEngine | None
    catalog: Catalog
    config: PlanConfig
    rows: RowReader
    session: Session
    world: World

    # ----- the catalog's arrays --------------------------------------------------------------
    @property
    def streams(self) -> list[Stream]:
        return self.catalog.streams

    @property
    def preparer(self) -> ShardPreparer:
        return self.catalog.preparer

    @property
    def spanner(self) -> SampleLocator:
        """Global sample id -> (shard, row) (the reference's name for it)."""
        return self.catalog.locator

    @property
    def num_samples(self) -> int:
        return self.catalog.num_samples

    samples_per_shard = property(lambda self: self.catalog.samples_per_shard)
    shards_per_stream = property(lambda self: self.catalog.shards_per_stream)
    stream_per_shard = property(lambda self: self.catalog.stream_per_shard)
    samples_per_stream = property(lambda self: self.catalog.samples_per_stream)
    shard_offset_per_stream = property(lambda self: self.catalog.shard_offset_per_stream)
    sample_offset_per_stream = property(lambda self: self.catalog.sample_offset_per_stream)

    # ----- configuration, resolved ---------------------------------------------------------
    num_canonical_nodes = _resolved(
        "num_canonical_nodes",
        lambda self: int(self.session.plans.config_now().canonical_nodes(self.world)))
    shuffle_algo = _resolved("shuffle_algo", lambda self: self.config.shuffle_algo)
    shuffle_block_size = _resolved(
        "shuffle_block_size",
        lambda self: int(self.session.plans.config_now().block_size(self.num_canonical_nodes)))
    sampling_method = _resolved("sampling_method", lambda self: self.config.sampling_method)
    sampling_granularity = _resolved("sampling_granularity",
                                     lambda self: self.config.sampling_granularity)
    batching_method = _resolved("batching_method", lambda self: self.config.batching_method)
    partition_algo = _resolved("partition_algo", lambda self: self.config.partition_algo)

    @property
    def size(self) -> int:
        """Number of unique samples over every stream (what `ds[i]` can address)."""
        return self.num_samples

    @property
    def epoch_size(self) -> int:
        """Samples in one epoch over all ranks, after mixing (before padding to whole batches)."""
        return int(self.config.epoch_size)

    def prepare_shard(self, shard_id: int) -> None:
        """Make shard `shard_id` (global over streams) ready on this node."""
        self.rows.prepare(int(shard_id))

    @property
    def num_streams(self) -> int:
        return len(self.streams)

    @property
    def sample_offset_per_shard(self) -> np.ndarray:
        """Global id of each shard's first sample."""
        return np.asarray(self.config.shard_offsets[:-1], np.int64)

    # ----- shards ----------------------------------------------------------------------------
    @property
    def num_shards(self) -> int:
        """Shards over every stream."""
        return len(self.samples_per_shard)

    @property
    def shards(self) -> list[ShardInfo]:
        """Every shard over every stream, in global shard order."""
        facts = self.catalog.facts
        fmt = self.catalog.formats()
        out = []
        for shard in range(self.num_shards):
            stream = int(self.stream_per_shard[shard])
            raw = FileInfo(facts.basenames[shard], int(facts.raw_bytes[shard]),
                           dict(facts.raw_hashes[shard]))
            zipped = None
            if facts.zip_basenames[shard] is not None:
                zipped = FileInfo(facts.zip_basenames[shard],  # type: ignore[arg-type]
                                  int(facts.zip_bytes[shard]), dict(facts.zip_hashes[shard]))
            out.append(ShardInfo(shard, stream, int(self.samples_per_shard[shard]),
                                 fmt[stream], facts.compression[shard], raw, zipped))
        return out

    # ----- cache -----------------------------------------------------------------------------
    @property
    def cache_usage(self) -> int:
        """Bytes this node's cache folders hold (0 when every stream is local-only)."""
        return 0 if self.cache is None else self.cache.usage()

    def evict_shard(self, shard_id: int) -> None:
        """Delete shard `shard_id`'s cached files now (fetched again when next read). A shard
        that only exists locally (`remote=None`) or that a reader holds is left alone."""
        shard_id = int(shard_id)
        if not 0 <= shard_id < self.num_shards:
            raise IndexError(f"shard {shard_id} out of range [0, {self.num_shards})")
        if self.cache is not None:
            self.cache.evict(shard_id)
            self.rows.forget(shard_id)
        else:
            self.rows.readers.forget(shard_id)

    def evict_coldest_shard(self) -> None:
        """Evict the cached shard whose next use is farthest away (CacheLimitError, a
        ValueError, when no shard can be evicted)."""
        victim = None if self.cache is None else self.cache.evict_coldest()
        if victim is None:
            raise CacheLimitError("Attempted shard eviction, but there are no shards present "
                                  "locally to evict: no cached shard can be evicted (none is "
                                  "present, or every present one is in use or has no remote)")
        self.rows.forget(victim)

    # ----- epochs ----------------------------------------------------------------------------
    @property
    def next_epoch(self) -> int:
        """The epoch this rank's next iteration runs."""
        return self.session.epochs.next_epoch()

    @next_epoch.setter
    def next_epoch(self, epoch: int) -> None:
        """Make the next iteration run `epoch` from its start (keeps a loaded state's
        canonical node count and seed)."""
        if int(epoch) < 0:
            raise ArgumentError(f"next_epoch must be >= 0, got {epoch}")
        self.session.resume.restart_at(int(epoch))

    def resample_streams(self, epoch: int, stream_id: int | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """The samples `epoch` draws (before shuffling), shard by shard as the reference lays
        them out: `shuffle_units` holds each shard's whole passes and then its partial pass as
        sizes, `sample_ids` the global ids in the same layout (each whole pass in row order,
        then the partial pass's rows sorted). `stream_id` limits both to one stream."""
        from streaming.plan.order import EpochOrder

        cfg = dataclasses.replace(self.session.plans.config_now(), shuffle=False)
        ncn = int(cfg.canonical_nodes(self.world))
        order = EpochOrder(cfg, ncn, int(epoch))
        ids = np.sort(np.concatenate([order.picks(c)[0] for c in range(ncn)]).astype(np.int64))
        starts = np.asarray(cfg.shard_offsets, np.int64)
        shard_of = np.searchsorted(starts, ids, side="right") - 1
        if stream_id is not None:
            keep = self.stream_per_shard[shard_of] == int(stream_id)
            ids, shard_of = ids[keep], shard_of[keep]
        drawn = np.bincount(shard_of, minlength=self.num_shards)
        times = np.bincount(ids, minlength=int(starts[-1]))  # draws of every sample id
        units: list[int] = []
        parts: list[np.ndarray] = [np.zeros(0, np.int64)]
        for shard in np.flatnonzero(drawn).tolist():
            size, count = int(self.samples_per_shard[shard]), int(drawn[shard])
            rows = np.arange(starts[shard], starts[shard + 1], dtype=np.int64)
            whole, partial = count // size, count % size
            units += [size] * whole + ([partial] if partial else [])
            parts += [rows] * whole + ([rows[times[rows] > whole]] if partial else [])
        return np.asarray(units, np.int64), np.concatenate(parts)

    # ----- streams ---------------------------------------------------------------------------
    def _fill_stream_weights(self) -> None:
        """Write each stream's resolved `proportion`, `repeat` and `choose` onto it, as the
        reference does once a dataset is built."""
        targets = np.asarray(self.config.samples_per_stream_epoch, np.int64)
        sizes = np.asarray(self.config.samples_per_stream, np.int64)
        given = [stream.weights.proportion for stream in self.streams]
        if all(p is not None for p in given):  # relative weights: their normalised shares
            shares = np.asarray(given, np.float64) / max(float(np.sum(given)), 1e-300)
        else:  # absolute or none: each stream's share of the epoch's draws
            shares = targets / max(int(targets.sum()), 1)
        for stream, choose, size, share in zip(self.streams, targets.tolist(), sizes.tolist(),
                                               shares.tolist()):
            stream.record_mix(proportion=share, repeat=choose / max(size, 1),
                              choose=int(choose))
