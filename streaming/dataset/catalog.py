"""The catalog of a dataset: its streams and what their indexes say (shard arrays, codecs, the
sample-to-shard locator, the shards' fixed facts), read once at construction. Picklable: DataLoader
workers get a copy instead of reading the indexes again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streaming.cache.folder.origin import Origin
from streaming.cache.folder.parsed_index import load_form
from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.prepare.preparer import ShardPreparer
from streaming.cache.prepare.text_meta import prepare_meta_files
from streaming.cache.shard_facts import ShardFacts
from streaming.errors import IndexNotFoundError, PlanError
from streaming.format.index import DatasetIndex, read_index
from streaming.format.local_files import check_local_shards
from streaming.format.parquet_decoded import forget_decoded
from streaming.format.rows import RowCodec
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader
from streaming.format.text_shard import open_shard
from streaming.read.sample_locator import SampleLocator
from streaming.storage.schemes import split_scheme
from streaming.stream import Stream, stream_class
from streaming.util.at_once import map_at_once

INDEX_FETCHES = 16  # remote streams whose index.json is fetched and read at once


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


@dataclass
class Catalog:
    """Streams and their shards, numbered globally over the streams in order."""

    streams: list[Stream]
    codecs: list[Any]
    samples_per_shard: np.ndarray
    shards_per_stream: np.ndarray
    samples_per_stream: np.ndarray
    locator: SampleLocator
    preparer: ShardPreparer
    stream_per_shard: np.ndarray = field(init=False)
    shard_offset_per_stream: np.ndarray = field(init=False)
    sample_offset_per_stream: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.stream_per_shard = np.repeat(np.arange(len(self.streams)), self.shards_per_stream)
        self.shard_offset_per_stream = _offsets(self.shards_per_stream)
        self.sample_offset_per_stream = _offsets(self.samples_per_stream)

    @classmethod
    def open(cls, streams: list[Stream], *, allow_unsafe_types: bool = False) -> Catalog:
        """Read every stream's index (and text shards' metadata); shards read in place are
        checked now, since nothing could fetch a bad one again later."""
        return cls.of(streams, read_indexes(streams), allow_unsafe_types=allow_unsafe_types)

    @classmethod
    def of(cls, streams: list[Stream], indexes: list[DatasetIndex], *,
           allow_unsafe_types: bool = False) -> Catalog:
        """The catalog of `streams` whose indexes were read already (see `open`).

        Args:
            streams: the dataset's streams.
            indexes: each stream's index.
            allow_unsafe_types: whether pickle-typed columns may be decoded.
        """
        prepare_meta_files(streams, indexes)  # text-format (split) shards only
        for stream, index in zip(streams, indexes):
            if stream.remote_dir is None:
                check_local_shards(index)
        samples_per_shard = np.concatenate([ix.samples_per_shard for ix in indexes]
                                           ).astype(np.int64)
        return cls(streams=streams,
                   codecs=[ix.codec(allow_unsafe_types=allow_unsafe_types) for ix in indexes],
                   samples_per_shard=samples_per_shard,
                   shards_per_stream=np.array([ix.num_shards for ix in indexes], np.int64),
                   samples_per_stream=np.array([ix.num_samples for ix in indexes], np.int64),
                   locator=SampleLocator(samples_per_shard),
                   preparer=ShardPreparer(streams, ShardFacts.from_indexes(indexes)))

    @property
    def facts(self) -> ShardFacts:
        return self.preparer.facts

    @property
    def num_samples(self) -> int:
        return int(self.samples_per_stream.sum())

    @property
    def mean_sample_bytes(self) -> float:
        return float(np.sum(self.facts.raw_bytes)) / max(self.num_samples, 1)

    def cached_streams(self) -> np.ndarray:
        """Whether each stream keeps shard bytes in its cache folder: it has a remote, and its
        shards are not read in place from the remote's files (`ShardFacts.in_place`)."""
        facts = self.facts
        placed = np.bincount(facts.stream_of_shard, weights=facts.in_place,
                             minlength=len(self.streams))
        in_place = (placed == self.shards_per_stream) & (self.shards_per_stream > 0)
        remote = np.array([stream.remote_dir is not None for stream in self.streams], bool)
        return remote & ~in_place

    @property
    def caches_nothing(self) -> bool:
        """Whether no stream keeps shard bytes in a cache folder: each is local-only (no
        remote) or read in place."""
        return not self.cached_streams().any()

    def cache_other_bytes(self) -> int:
        """What the cache folders hold beside the shards, from the indexes alone (the same on
        every node): each cached stream's index.json and the folder's bookkeeping files (a
        stream read in place keeps its folder out of the cache, like a local-only one)."""
        from streaming.cache.folder.file_names import BOOKKEEPING_BYTES
        from streaming.format.parquet_index import FOOTER_SUFFIX

        total = 0
        for stream, cached in zip(self.streams, self.cached_streams().tolist()):
            if not cached:
                continue
            kept = [stream.local_dir / "index.json"]
            if stream.parquet is not None:  # a copy of each file's footer beside the index
                kept += stream.local_dir.glob(f"**/*{FOOTER_SUFFIX}")
            total += (sum(f.stat().st_size for f in kept if f.is_file()) + BOOKKEEPING_BYTES
                      + stream.side_bytes_to_come())
        return total

    def footprint(self) -> Footprint:
        """Cache bytes per shard (see `shard_footprint`)."""
        from streaming.cache.engine.cache_engine import shard_footprint  # only under a cache_limit

        return shard_footprint(self.facts, self.streams)

    def decoded_footprint(self) -> Footprint:
        """Bytes each shard holds in a reading process once decoded whole (a Parquet row group;
        0 for the shards read row by row): what a shuffle is fitted to so that the row groups
        in use stay decoded (see `fit_plan`)."""
        decoded = self.facts.decoded_bytes
        return Footprint(decoded, np.zeros_like(decoded))

    def same_schema(self) -> bool:
        return all(codec == self.codecs[0] for codec in self.codecs)

    def formats(self) -> list[str]:
        """Each stream's shard format name ("mds" unless a text format)."""
        return [getattr(codec, "format", "mds") for codec in self.codecs]

    def forget_decoded(self) -> None:
        """Drop the row groups of this catalog's Parquet streams that this process keeps
        decoded (a closed dataset's memory goes back at once)."""
        for stream, name in zip(self.streams, self.formats()):
            if name == "parquet":
                forget_decoded(stream.local_dir)

    def codec_of(self, shard: int) -> SampleCodec | RowCodec | None:
        """The codec the index gives shard `shard` (its stream's)."""
        return self.codecs[int(self.stream_per_shard[shard])]

    def open_file(self, shard: int, path: Path | str) -> ShardReader:
        """A reader of prepared shard `shard` at `path`, checked against the index."""
        stream = int(self.stream_per_shard[shard])
        return open_shard(path, self.codecs[stream],
                          expected_samples=int(self.samples_per_shard[shard]),
                          expected_bytes=int(self.facts.raw_bytes[shard]))


def build_streams(streams: Sequence[Stream] | None, remote: str | None, local: str | None,
                  split: str | None, stream_name: str, stream_config: dict[str, Any] | None,
                  **defaults: Any) -> list[Stream]:
    """The dataset's streams: `streams` as given, or one stream of `remote`/`local`; each with
    the dataset-wide `defaults` (download_retry, ...) where it sets none of its own."""
    out = _streams(streams, remote, local, split, stream_name, stream_config)
    for stream in out:
        stream.apply_defaults(**defaults)
    return out


def _streams(streams: Sequence[Stream] | None, remote: str | None, local: str | None,
             split: str | None, stream_name: str,
             stream_config: dict[str, Any] | None) -> list[Stream]:
    if streams is not None and not list(streams) and (remote is not None or local is not None):
        streams = None  # an empty list counts as none (llm-foundry passes `streams=[]`)
    if streams is not None:
        if remote is not None or local is not None:
            raise PlanError("You must provide either `streams` or `remote`/`local`, but "
                            "not both: pass either `streams` or `remote`/`local`, not both")
        streams = list(streams)
        if not streams:
            raise PlanError("`streams` is empty")
        for s in streams:
            if not isinstance(s, Stream):
                raise PlanError(f"`streams` must hold Stream objects, got {type(s).__name__}")
        _check_names(streams)
        return streams
    if remote is None and local is None:
        raise PlanError("You must provide either `streams` or `remote`/`local`: "
                    "StreamingDataset needs `streams`, `remote` or `local`")
    cls = stream_class(stream_name)
    return [cls(remote=remote, local=local, split=split, **(stream_config or {}))]


def _check_names(streams: Sequence[Stream]) -> None:
    """Each stream's metrics key (its `name`, or its position without one) is its own."""
    seen: dict[str, int] = {}
    for i, stream in enumerate(streams):
        key = str(getattr(stream, "name", None) or i)
        if key in seen:
            raise PlanError(f"streams {seen[key]} and {i} are both named {key!r}: a stream's "
                            "name keys its metrics (stream/<name>/...), so each must be unique")
        seen[key] = i


def read_indexes(streams: Sequence[Stream], at_once: int | None = None) -> list[DatasetIndex]:
    """Each stream's index, in order: fetched first for a stream with a remote (into its cache
    folder, see `Stream.index_file`), on up to `at_once` threads when several streams fetch
    theirs over the network, so that a dataset of many remote streams waits about one round
    trip per `at_once` streams instead of one per stream. On a failure (or an interrupt), the
    fetches not begun are dropped and the error of the first failing stream in order is
    raised without waiting for those under way, which end within their own deadlines.

    Args:
        streams: the dataset's streams.
        at_once: fetches in flight at most (None: INDEX_FETCHES).
    """
    at_once = INDEX_FETCHES if at_once is None else at_once
    fetched = sum(map(over_network, streams))
    return map_at_once(_read_index, streams, min(at_once, fetched), name="streaming-index")


def over_network(stream: Stream) -> bool:
    """Whether the stream's index comes over the network: what threads overlap. An index
    copied from a local folder is work for the CPU alone, which threads only slow down.

    Args:
        stream: one of the dataset's streams.
    """
    remote = stream.remote_dir
    return remote is not None and split_scheme(remote)[0] not in ("", "file")


def _read_index(stream: Stream) -> DatasetIndex:
    path = stream.index_file()
    try:
        return load_index(path)
    except IndexNotFoundError as exc:
        if stream.remote_dir is not None:
            raise
        raise IndexNotFoundError(
            f"No `remote` provided, but local file {path} does not exist either: "
            f"{stream.local_dir} holds no MDS dataset (write one there, or give the stream a "
            "`remote` to copy it from)") from exc


def load_index(path: Path) -> DatasetIndex:
    """A folder's index.json (`path`) from the form its fetching rank saved, or parsed.

    Args:
        path: the index.json of a dataset or cache folder.
    """
    if path.name == "index.json":
        origin = Origin.read(path.parent)
        found = load_form(path.parent, origin.index if origin is not None else None)
        if found is not None:
            return found
    return read_index(path)
