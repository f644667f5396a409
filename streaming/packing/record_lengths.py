"""Recording the sample lengths of a dataset written without them (by the reference writer, or
by MDSWriter without `lengths=`), in place, in a folder or at a URL: every shard is read once,
its side file (`shard.00000.mds.lengths`) published beside it, and then the index.json
republished with the lengths key, exactly as MDSWriter(lengths=column) would have written it.

After that, packing or a token mix fetches 4 bytes per sample on each node instead of reading
every shard. Reference readers ignore the key and the files. Until the index is republished
the dataset is as it was (side files not yet named are ignored), so an interrupted run leaves
nothing half-published and is simply run again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streaming.dataset.scratch_shards import RawShard, scratch_shards
from streaming.errors import ArgumentError, FormatError
from streaming.format.hashing import hexdigest
from streaming.format.index import (
    INDEX_NAME,
    LENGTHS_DTYPE,
    LENGTHS_KEY,
    LENGTHS_SUFFIX,
    DatasetIndex,
    index_bytes,
    lengths_key,
    parse_index,
)
from streaming.format.sample_lengths import shard_lengths
from streaming.format.shard import ShardReader
from streaming.storage import fetch, join, upload
from streaming.stream import Stream
from streaming.util.at_once import map_at_once

AT_ONCE = 4  # shards read at once (each needs its raw size in temporary space)
_U32_MAX = (1 << 32) - 1


@dataclass(frozen=True)
class RecordedLengths:
    """What `record_lengths` did.

    Args:
        index: the republished index.json (path or URL), or the untouched one.
        column: the column whose lengths the index records.
        shards: shards read (0 when the lengths were recorded already).
        samples: samples in the dataset.
        total: the sum of the lengths (None when no shard was read).
    """

    index: str
    column: str
    shards: int
    samples: int
    total: int | None


def record_lengths(dataset: str | os.PathLike, column: str, *, force: bool = False,
                   at_once: int = AT_ONCE,
                   on_shard: Callable[[int], None] | None = None) -> RecordedLengths:
    """Record the lengths of `column` for every sample of `dataset` (side files plus the
    index key MDSWriter(lengths=column) writes); nothing to do when the index records them
    for `column` already.

    Args:
        dataset: the dataset's folder or URL (s3://, gs://, az://, file://...).
        column: the column whose lengths count: ndarray elements, str/bytes bytes, an integer
            column's value, else the decoded value's length.
        force: replace lengths the index records for another column (else an ArgumentError).
        at_once: shards read at once.
        on_shard: called with a shard's sample count once its side file is published (from
            the reading threads; a progress bar's update).
    """
    location = os.fspath(dataset).rstrip("/").removesuffix("/" + INDEX_NAME)
    with tempfile.TemporaryDirectory(prefix="mds-lengths-") as tmp:
        stream, index = _open(location, Path(tmp))
        recorded = index.extra.get(LENGTHS_KEY)
        if isinstance(recorded, dict) and recorded.get("column") == column and not force:
            return RecordedLengths(join(location, INDEX_NAME), column, 0, index.num_samples,
                                   None)
        if recorded is not None and not force:
            raise ArgumentError(f"{location}: the index records the lengths of "
                                f"{recorded.get('column')!r}; pass force=True (--force) to "
                                f"record {column!r} instead")
        if index.format != "mds":
            raise FormatError(f"{location}: lengths are recorded for MDS shards, not "
                              f"{index.format!r} ones")
        if column not in index.columns:
            raise FormatError(f"{location}: no column {column!r} (columns: "
                              f"{sorted(index.columns)})")
        hashes = sorted(index.raw_hashes[0]) if index.num_shards else []
        raw_shard = scratch_shards(stream, index)
        def one(shard: int) -> tuple[dict[str, Any], int]:
            done = _side_file(location, raw_shard, index, shard, column, hashes)
            if on_shard is not None:
                on_shard(int(index.samples_per_shard[shard]))
            return done

        files = map_at_once(one, range(index.num_shards), at_once, name="mds-lengths")
        new_index = Path(tmp, INDEX_NAME)
        new_index.write_bytes(index_bytes(index.shards, {
            **index.extra, **lengths_key(column, [info for info, _ in files])}))
        upload(new_index, join(location, INDEX_NAME))
    return RecordedLengths(join(location, INDEX_NAME), column, index.num_shards,
                           index.num_samples, sum(total for _, total in files))


def _open(location: str, scratch: Path) -> tuple[Stream, DatasetIndex]:
    """The dataset as a stream whose shards are read in place or fetched into `scratch`, and
    its index, fetched afresh."""
    url = join(location, INDEX_NAME)
    fetch(url, scratch / INDEX_NAME, max_parts=1)
    index = parse_index((scratch / INDEX_NAME).read_bytes(), source=url)
    return Stream(remote=location, local=scratch / "mirror"), index


def _side_file(location: str, raw_shard: RawShard, index: DatasetIndex, shard: int,
               column: str, hashes: list[str]) -> tuple[dict[str, Any], int]:
    """Shard `shard`'s side file published beside it: (its index entry, its lengths' sum)."""
    name = index.basenames[shard] + LENGTHS_SUFFIX
    with raw_shard(shard) as raw, ShardReader(
            raw, index.codec(), expected_samples=int(index.samples_per_shard[shard]),
            expected_bytes=int(index.raw_bytes[shard])) as reader:
        lengths = shard_lengths(reader, column)
    url = join(location, index.basenames[shard])
    if lengths.size and (lengths.min() < 0 or lengths.max() > _U32_MAX):
        raise FormatError(f"{url}: column {column!r} has lengths that do not fit uint32")
    data = lengths.astype(LENGTHS_DTYPE).tobytes()
    with tempfile.TemporaryDirectory(prefix="mds-lengths-") as tmp:
        Path(tmp, name.replace("/", "_")).write_bytes(data)
        upload(Path(tmp, name.replace("/", "_")), url + LENGTHS_SUFFIX)
    entry = {"basename": name, "bytes": len(data),
             "hashes": {algo: hexdigest(algo, data) for algo in hashes}}
    return entry, int(lengths.sum(dtype=np.int64))
