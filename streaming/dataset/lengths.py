"""Per-sample token counts of a dataset without decoding samples: the writer's side files when
the index has them, else a vectorised scan of the shards' per-sample size headers, cached once.

`load_lengths(source, column)` accepts a dataset directory, a LocalDataset or a StreamingDataset
and returns one int64 count per global sample id.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streaming.dataset.scratch_shards import ColumnShards, RawShard, column_shards, scratch_shards
from streaming.errors import (
    DownloadTimeoutError,
    FormatError,
    IndexFileError,
    PlanError,
    ShardCorruptError,
)
from streaming.format.index import LENGTHS_DTYPE, LENGTHS_KEY, DatasetIndex
from streaming.format.sample_lengths import LengthFn, shard_lengths
from streaming.format.text_shard import open_shard
from streaming.storage.singleflight import single_flight
from streaming.stream import Stream
from streaming.util.at_once import map_at_once
from streaming.util.atomic import atomic_write_bytes
from streaming.util.confine import confine
from streaming.util.files import has_size

SIDE_FETCHES = 16  # side files fetched at once
SCAN_AT_ONCE = 4  # shards of a stream a scan of lengths not recorded reads at once
SCAN_WAIT = 6 * 3600.0  # seconds a process waits for another one's scan of the same lengths


# ---- one stream (an index plus how to reach its files) -------------------------------------

@dataclass
class LengthSource:
    """Everything load_lengths needs from one stream: its index, where its local files go,
    how to make a raw shard ready, and how to fetch a side file that is not local yet."""

    index: DatasetIndex
    root: Path
    raw_shard: RawShard
    fetch: Callable[[dict[str, Any], Path], None] | None = None
    scan_at_once: int = 1  # shards a header scan reads at once (each raw copy takes room)
    # Parquet: the row groups holding only the given column's chunks (None: MDS)
    column_shards: Callable[[str], ColumnShards] | None = None


def recorded_spec(index: DatasetIndex) -> dict[str, Any] | None:
    """The index's lengths key, validated against its shards (None when absent)."""
    spec = index.extra.get(LENGTHS_KEY)
    if spec is None:
        return None
    files = spec.get("files") if isinstance(spec, dict) else None
    if not isinstance(files, list) or len(files) != index.num_shards:
        raise IndexFileError(f"{index.source}: {LENGTHS_KEY!r} must list one file per shard")
    if spec.get("dtype") != LENGTHS_DTYPE:
        raise IndexFileError(f"{index.source}: {LENGTHS_KEY!r} dtype {spec.get('dtype')!r} "
                             f"is not {LENGTHS_DTYPE!r}")
    for i, (entry, count) in enumerate(zip(files, index.samples_per_shard.tolist())):
        if not isinstance(entry, dict) or entry.get("bytes") != 4 * count:
            raise IndexFileError(f"{index.source}: {LENGTHS_KEY!r} file {i} should hold "
                                 f"{count} uint32 values: {entry!r}")
        if not isinstance(entry.get("basename"), str):
            raise IndexFileError(f"{index.source}: {LENGTHS_KEY!r} file {i} has no "
                                 f"'basename' naming it: {entry!r}")
    return spec


def _recorded(source: LengthSource, spec: dict[str, Any]) -> np.ndarray:
    parts = []
    for entry, count in zip(spec["files"], source.index.samples_per_shard.tolist()):
        path = _side_path(source, entry)
        if not has_size(path, 4 * count) and source.fetch is not None:
            source.fetch(entry, path)
        if not has_size(path, 4 * count):
            raise ShardCorruptError(f"{path}: lengths file missing or not {4 * count} bytes")
        parts.append(np.fromfile(path, LENGTHS_DTYPE))
    return _concat(parts)


def _side_path(source: LengthSource, entry: dict[str, Any]) -> Path:
    return source.root.joinpath(*str(entry["basename"]).split("/"))


@dataclass(frozen=True)
class SideFile:
    """A recorded side file a stream has not got locally yet, and how to fetch it."""

    fetch: Callable[[dict[str, Any], Path], None]
    entry: dict[str, Any]
    path: Path

    def fetched(self) -> None:
        """Fetch it to `path`."""
        self.fetch(self.entry, self.path)


def fetch_side_files(sources: Sequence[LengthSource], column: str | None = None,
                     fn: LengthFn | None = None) -> None:
    """Fetch, up to SIDE_FETCHES at once, the side files `stream_lengths(source, column, fn)`
    will read that are not local yet (one per shard of a stream with recorded lengths), so a
    remote dataset of many shards waits about one round trip per SIDE_FETCHES of them.

    Args:
        sources: the streams.
        column: as `stream_lengths`.
        fn: as `stream_lengths`.
    """
    missing = []
    for source in sources:
        spec = _used_spec(source, column, fn)
        if spec is None or source.fetch is None:
            continue
        for entry, count in zip(spec["files"], source.index.samples_per_shard.tolist()):
            path = _side_path(source, entry)
            if not has_size(path, 4 * count):
                missing.append(SideFile(source.fetch, entry, path))
    map_at_once(SideFile.fetched, missing, SIDE_FETCHES, name="streaming-lengths")


def _used_spec(source: LengthSource, column: str | None,
               fn: LengthFn | None) -> dict[str, Any] | None:
    """The recorded lengths `stream_lengths` reads for `column` (None: it computes them)."""
    spec = recorded_spec(source.index)
    if fn is None and spec is not None and (column is None or spec.get("column") == column):
        return spec
    return None


def _computed(source: LengthSource, column: str | None, fn: LengthFn | None) -> np.ndarray:
    codec = source.index.codec(allow_unsafe_types=fn is not None)
    if column is not None and column not in codec.column_names:
        raise PlanError(f"{source.index.source}: no column {column!r} to measure "
                        f"(columns: {codec.column_names})")
    counts = source.index.samples_per_shard
    raw_shard, whole = source.raw_shard, True
    if column is not None and fn is None and source.column_shards is not None:
        narrowed = source.column_shards(column)
        codec, raw_shard, whole = narrowed.codec, narrowed.raw, False

    def one(shard: int) -> np.ndarray:
        with raw_shard(shard) as raw, open_shard(
                raw, codec, expected_samples=int(counts[shard]),
                expected_bytes=int(source.index.raw_bytes[shard]) if whole else None) as reader:
            return shard_lengths(reader, column, fn)

    at_once = source.scan_at_once if fn is None else 1  # a user's function may not be reentrant
    return _concat(map_at_once(one, np.flatnonzero(counts).tolist(), at_once,
                               name="streaming-scan"))


def stream_lengths(source: LengthSource, column: str | None = None,
                   fn: LengthFn | None = None) -> np.ndarray:
    """int64 lengths of one stream's samples, from side files, the cache, or a scan."""
    spec = _used_spec(source, column, fn)
    if spec is not None:
        return _recorded(source, spec)
    if fn is not None:
        return _computed(source, None, fn)
    if column is None:
        raise PlanError(f"{source.index.source} records no sample lengths: pass column= "
                        "(the token column) or fn= to compute them")
    cache = _cache_path(source, column)
    count = source.index.num_samples
    if has_size(cache, 4 * count):
        return np.fromfile(cache, LENGTHS_DTYPE).astype(np.int64)
    with ExitStack() as held:
        try:  # one process of the node scans (and downloads); the others wait for its result
            held.enter_context(single_flight(cache, deadline=time.monotonic() + SCAN_WAIT))
        except DownloadTimeoutError:
            raise DownloadTimeoutError(
                f"{source.index.source}: another process of this node has scanned the lengths "
                f"of {column!r} for over {SCAN_WAIT:g} s ({cache}); record them once with "
                "`streaming lengths` instead") from None
        if has_size(cache, 4 * count):
            return np.fromfile(cache, LENGTHS_DTYPE).astype(np.int64)
        lengths = _computed(source, column, None)
        if lengths.size and (lengths.min() < 0 or lengths.max() >= 1 << 32):
            raise FormatError(f"{source.index.source}: column {column!r} lengths do not fit "
                              "uint32")
        _write_cache(cache, lengths)
    return lengths


def _cache_path(source: LengthSource, column: str) -> Path:
    """Cache file of computed lengths, keyed by the index contents and the column."""
    key = hashlib.blake2b(digest_size=8)
    for shard in source.index.shards:
        key.update(repr(sorted((shard.get("raw_data") or {}).items())).encode())
    key.update(column.encode())
    try:  # a rewritten dataset with identical shard sizes must not reuse old lengths
        stat = os.stat(source.index.source)
        key.update(f"{stat.st_mtime_ns}:{stat.st_size}".encode())
    except OSError:
        pass
    name = f".lengths.{key.hexdigest()}.u32"
    if os.access(source.root, os.W_OK):
        return source.root / name
    user = f"mds-streaming-{os.getuid()}" if hasattr(os, "getuid") else "mds-streaming"
    return Path(tempfile.gettempdir()) / user / "lengths" / name


def _write_cache(path: Path, lengths: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, lengths.astype(LENGTHS_DTYPE).tobytes())


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


# ---- datasets --------------------------------------------------------------------------------

def sources_of(dataset: Any) -> list[LengthSource]:
    """One LengthSource per stream of a directory path, LocalDataset or StreamingDataset."""
    if isinstance(dataset, (str, os.PathLike)):
        from streaming.dataset.local_dataset import LocalDataset

        dataset = LocalDataset(dataset)
    if hasattr(dataset, "streams") and hasattr(dataset, "preparer"):
        return [_stream_source(dataset, s) for s in range(len(dataset.streams))]
    if hasattr(dataset, "index") and hasattr(dataset, "root"):
        # LocalDataset: its row reader decompresses a zipped shard once when needed.
        prepare = dataset.rows.prepare
        return [LengthSource(dataset.index, dataset.root, lambda shard: nullcontext(
            prepare(shard)))]
    raise PlanError(f"cannot read sample lengths from {type(dataset).__name__}: pass a dataset "
                    "directory, a LocalDataset or a StreamingDataset")


def _stream_source(dataset: Any, s: int) -> LengthSource:
    from streaming.format.index import read_index

    stream = dataset.streams[s]
    return stream_source(stream, read_index(stream.local_dir / "index.json"))


def stream_source(stream: Stream, index: DatasetIndex) -> LengthSource:
    """The LengthSource of a Stream whose index is read: its side files fetched into its
    folder, its shards read in place or from scratch copies (`scratch_shards`), never through
    the node's shard cache.

    Args:
        stream: the stream.
        index: its index.
    """

    def fetch(entry: dict[str, Any], dest: Path) -> None:
        if stream.remote_dir is not None:
            confine(stream.local_dir, dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            stream.fetch(entry["basename"], dest, expected_size=entry.get("bytes"),
                         expected_hashes=entry.get("hashes") or None)

    def narrowed(column: str) -> ColumnShards:
        return column_shards(stream, index, column)

    return LengthSource(index, stream.local_dir, scratch_shards(stream, index), fetch,
                        SCAN_AT_ONCE, narrowed if stream.parquet is not None else None)


def load_lengths(dataset: Any, column: str | None = None, *,
                 fn: LengthFn | None = None) -> np.ndarray:
    """int64 token count of every sample (global ids, streams concatenated in order).

    Uses the lengths the writer recorded (`MDSWriter(lengths=...)`) when they match `column`
    (or whenever `column` is None); otherwise scans the shards' size headers for `column` and
    caches the result next to the data; `fn(sample)` decodes every sample and is not cached.

    Args:
        dataset: A dataset folder, a LocalDataset or a StreamingDataset.
        column: The column whose per-sample length counts (e.g. "tokens"); None: the lengths
            the writer recorded, whatever their column.
        fn: A function of the decoded sample giving its length, instead of `column`.
    """
    return _concat(per_stream_lengths(sources_of(dataset), column, fn))


def per_stream_lengths(sources: Sequence[LengthSource], column: str | None = None,
                       fn: LengthFn | None = None) -> list[np.ndarray]:
    """Each stream's `stream_lengths`, the side files not local yet fetched first, at once.

    Args:
        sources: the streams.
        column: as `stream_lengths`.
        fn: as `stream_lengths`.
    """
    fetch_side_files(sources, column, fn)
    return [stream_lengths(source, column, fn) for source in sources]
