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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import ArgumentError, FormatError, ShardCorruptError
from streaming.format.compression import decompress_file
from streaming.format.index import (
    INDEX_NAME,
    LENGTHS_DTYPE,
    LENGTHS_KEY,
    LENGTHS_SUFFIX,
    DatasetIndex,
    index_bytes,
    parse_index,
)
from streaming.format.sample_lengths import shard_lengths
from streaming.format.shard import ShardReader
from streaming.storage import backend_for, fetch, join, upload
from streaming.storage.local_folder import LocalBackend
from streaming.util.at_once import map_at_once
from writers.shard_publish import file_info

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


@dataclass(frozen=True)
class _Dataset:
    """The dataset being recorded: its location, parsed index and scratch folder."""

    location: str
    index: DatasetIndex
    in_place: Path | None  # the folder itself when it is on this machine
    scratch: Path
    hashes: list[str]


def record_lengths(dataset: str | os.PathLike, column: str, *, force: bool = False,
                   at_once: int = AT_ONCE) -> RecordedLengths:
    """Record the lengths of `column` for every sample of `dataset` (side files plus the
    index key MDSWriter(lengths=column) writes); nothing to do when the index records them
    for `column` already.

    Args:
        dataset: the dataset's folder or URL (s3://, gs://, az://, file://...).
        column: the column whose lengths count: ndarray elements, str/bytes bytes, an integer
            column's value, else the decoded value's length.
        force: replace lengths the index records for another column (else an ArgumentError).
        at_once: shards read at once.
    """
    location = os.fspath(dataset).rstrip("/").removesuffix("/" + INDEX_NAME)
    with tempfile.TemporaryDirectory(prefix="mds-lengths-") as tmp:
        ds = _open(location, Path(tmp))
        recorded = ds.index.extra.get(LENGTHS_KEY)
        if isinstance(recorded, dict) and recorded.get("column") == column and not force:
            return RecordedLengths(join(location, INDEX_NAME), column, 0, ds.index.num_samples,
                                   None)
        if recorded is not None and not force:
            raise ArgumentError(f"{location}: the index records the lengths of "
                                f"{recorded.get('column')!r}; pass force=True (--force) to "
                                f"record {column!r} instead")
        if ds.index.format != "mds":
            raise FormatError(f"{location}: lengths are recorded for MDS shards, not "
                              f"{ds.index.format!r} ones")
        if column not in ds.index.columns:
            raise FormatError(f"{location}: no column {column!r} (columns: "
                              f"{sorted(ds.index.columns)})")
        files = map_at_once(lambda shard: _side_file(ds, shard, column),
                            range(ds.index.num_shards), at_once, name="mds-lengths")
        spec = {"column": column, "dtype": LENGTHS_DTYPE, "suffix": LENGTHS_SUFFIX,
                "files": [info for info, _ in files]}
        new_index = Path(tmp, INDEX_NAME)
        new_index.write_bytes(index_bytes(ds.index.shards, {**ds.index.extra,
                                                            LENGTHS_KEY: spec}))
        upload(new_index, join(location, INDEX_NAME))
    return RecordedLengths(join(location, INDEX_NAME), column, ds.index.num_shards,
                           ds.index.num_samples, sum(total for _, total in files))


def _open(location: str, scratch: Path) -> _Dataset:
    url = join(location, INDEX_NAME)
    backend, path = backend_for(url)
    in_place = Path(path).parent if isinstance(backend, LocalBackend) else None
    local_index = scratch / INDEX_NAME
    fetch(url, local_index, max_parts=1)
    index = parse_index(local_index.read_bytes(), source=url)
    hashes = sorted(index.shards[0]["raw_data"].get("hashes") or {}) if index.num_shards else []
    return _Dataset(location, index, in_place, scratch, hashes)


def _side_file(ds: _Dataset, shard: int, column: str) -> tuple[dict[str, Any], int]:
    """Shard `shard`'s side file published beside it: (its index entry, its lengths' sum)."""
    index = ds.index
    name = index.basenames[shard] + LENGTHS_SUFFIX
    work = ds.scratch / f"shard-{shard}"
    work.mkdir()
    try:
        raw = _raw_shard(ds, shard, work)
        with ShardReader(raw, index.codec(), expected_samples=int(index.samples_per_shard[shard]),
                         expected_bytes=int(index.raw_bytes[shard])) as reader:
            lengths = shard_lengths(reader, column)
        if lengths.size and (lengths.min() < 0 or lengths.max() > _U32_MAX):
            raise FormatError(f"{join(ds.location, index.basenames[shard])}: column {column!r} "
                              "has lengths that do not fit uint32")
        data = lengths.astype(LENGTHS_DTYPE).tobytes()
        (work / "side").write_bytes(data)
        upload(work / "side", join(ds.location, name))
        return file_info(name, data, ds.hashes), int(lengths.sum(dtype=np.int64))
    finally:
        for leftover in work.iterdir():
            leftover.unlink()
        work.rmdir()


def _raw_shard(ds: _Dataset, shard: int, work: Path) -> Path:
    """Shard `shard`'s raw file: in place when the dataset is on this machine and holds it,
    else decompressed in `work` from the compressed file (in place, or fetched and checked
    against the index's size and digests)."""
    index = ds.index
    raw_name, zip_name = index.basenames[shard], index.zip_basenames[shard]
    if ds.in_place is not None and (ds.in_place / raw_name).is_file():
        return ds.in_place / raw_name
    if zip_name is None:
        return fetch(join(ds.location, raw_name), work / "raw",
                     expected_size=int(index.raw_bytes[shard]),
                     expected_hashes=index.raw_hashes[shard] or None)
    zipped = ds.in_place / zip_name if ds.in_place is not None else None
    if zipped is not None and zipped.is_file():
        if zipped.stat().st_size != index.zip_bytes[shard]:
            raise ShardCorruptError(f"{zipped}: {zipped.stat().st_size} bytes, the index says "
                                    f"{index.zip_bytes[shard]}")
    else:
        zipped = fetch(join(ds.location, zip_name), work / "zip",
                       expected_size=int(index.zip_bytes[shard]),
                       expected_hashes=index.zip_hashes[shard] or None)
    return decompress_file(zipped, work / "raw", str(index.compression[shard]),
                           expected_size=int(index.raw_bytes[shard]), durable=False)
