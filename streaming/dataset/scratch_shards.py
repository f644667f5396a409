"""The raw shard files a lengths scan reads: the stream's own file where it is read in place,
else a copy fetched (and decompressed) into a scratch folder and removed once read.

A scan reads every shard of a stream once, at start-up. Through the node's shard cache it
would fill the cache folder with the whole dataset, outside the cache's accounting and its
`cache_limit`; a scratch copy needs one shard's room at a time.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from streaming.errors import PlanError
from streaming.format.compression import decompress_file
from streaming.format.index import DatasetIndex
from streaming.format.parquet_index import ParquetCodec
from streaming.stream import Stream

RawShard = Callable[[int], AbstractContextManager[Path]]


def scratch_shards(stream: Stream, index: DatasetIndex, columns: Sequence[str] | None = None
                   ) -> RawShard:
    """`raw(shard)`: a context giving shard `shard`'s raw file of `stream`, read in place when
    the stream's folder (or its filesystem remote) holds it, else a scratch copy fetched with
    the stream's own `fetch` (checked with its `validate_hash`) and removed on exit.

    Args:
        stream: the stream.
        index: its index.
        columns: of a Parquet stream, fetch only these columns' chunks (None: the stream's).
    """

    @contextmanager
    def raw(shard: int) -> Iterator[Path]:
        raw_name, zip_name = index.basenames[shard], index.zip_basenames[shard]
        found = _in_place(stream, raw_name)
        if found is not None:
            yield found
            return
        with tempfile.TemporaryDirectory(prefix="streaming-scan-") as scratch:
            if stream.parquet is not None:  # read beside a copy of its file's footer
                from streaming.cache.prepare.parquet_fetch import footer_beside, scratch_place

                place = scratch_place(raw_name, Path(scratch))
                fetched = stream.fetch(raw_name, place,
                                       expected_size=int(index.raw_bytes[shard]),
                                       **({"columns": columns} if columns else {}))
                yield footer_beside(stream.local_dir, fetched)
                return
            if zip_name is None:
                yield _fetched(stream, raw_name, Path(scratch, "raw"), int(index.raw_bytes[shard]),
                               index.raw_hashes[shard])
                return
            zipped = _in_place(stream, zip_name) or _fetched(
                stream, zip_name, Path(scratch, "zip"), int(index.zip_bytes[shard]),
                index.zip_hashes[shard])
            yield decompress_file(zipped, Path(scratch, "raw"), str(index.compression[shard]),
                                  expected_size=int(index.raw_bytes[shard]), durable=False)

    return raw


@dataclass(frozen=True)
class ColumnShards:
    """A Parquet stream's row groups holding one column's chunks only (a lengths scan's).

    Args:
        codec: the stream's codec narrowed to the column.
        raw: each row group's file, as `scratch_shards` gives them.
    """

    codec: ParquetCodec
    raw: RawShard


def column_shards(stream: Stream, index: DatasetIndex, column: str) -> ColumnShards:
    """The row groups of Parquet `stream` holding only `column`'s chunks (PlanError when the
    stream has no such column).

    Args:
        stream: a Parquet stream.
        index: its index.
        column: the column.
    """
    codec = index.codec()
    if not isinstance(codec, ParquetCodec):
        raise PlanError(f"{index.source}: not a Parquet stream's index")
    return ColumnShards(codec.only(column), scratch_shards(stream, index, [column]))


def _in_place(stream: Stream, name: str) -> Path | None:
    path = stream.local_dir / name if stream.remote_dir is None else stream.source_path(name)
    return path if path is not None and path.is_file() else None


def _fetched(stream: Stream, name: str, dest: Path, size: int, hashes: dict[str, str]) -> Path:
    algo = stream.validate_hash
    wanted = {algo: hashes[algo]} if algo and algo in hashes else None
    return stream.fetch(name, dest, expected_size=size, expected_hashes=wanted)
