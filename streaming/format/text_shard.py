"""Text shards (the text formats): a data file of rows plus a `.meta` file indexing it.

Meta layout: `u32 N`, `u32 offsets[N + 1]` (byte offsets into the data file), then the writer's
config JSON. A `TextShardReader` maps the data file and takes its offsets from the meta file,
so everything downstream of a reader (spans, layouts, positional reads, batch decoding) is the
MDS path unchanged; only the row codec differs.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from streaming.format.rows import RowCodec, row_codec
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader

META_SUFFIX = ".meta"
_U32 = struct.Struct("<I")


def meta_path(data_path: str | os.PathLike) -> Path:
    """The meta file beside a text shard's data file (`shard.00000.json.meta`)."""
    data_path = Path(data_path)
    return data_path.with_name(data_path.name + META_SUFFIX)


def meta_bytes(sizes: list[int], first: int, config: dict[str, Any]) -> bytes:
    """A meta file for rows of `sizes` bytes starting at byte `first` of the data file."""
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    offsets += first
    head = np.concatenate(([len(sizes)], offsets)).astype("<u4").tobytes()
    return head + json.dumps(config, sort_keys=True).encode("utf-8")


class TextShardReader(ShardReader):
    """Random access to the rows of one text shard (`path` is its data file)."""

    def __init__(self, path: str | os.PathLike, codec: RowCodec | None = None,
                 **options: Any) -> None:
        super().__init__(path, codec, **options)  # type: ignore[arg-type]

    def _check_size(self, size: int) -> None:
        """Any size: a data file of no rows is empty, its offsets live in the meta file."""

    def _validate(self, mapped: mmap.mmap, size: int) -> None:
        meta = meta_path(self.path)
        try:
            raw = meta.read_bytes()
        except FileNotFoundError:
            raise self._corrupt(f"meta file {meta.name} is missing") from None
        if len(raw) < 8:
            raise self._corrupt(f"meta file {meta.name} has only {len(raw)} bytes")
        (count,) = _U32.unpack_from(raw, 0)
        if self.expected_samples is not None and count != self.expected_samples:
            raise self._corrupt(f"meta file says {count} samples, the index says "
                                f"{self.expected_samples}")
        table_end = 4 + 4 * (count + 1)
        if table_end > len(raw):
            raise self._corrupt(f"meta file {meta.name} is truncated ({len(raw)} bytes for "
                                f"{count} samples)")
        offsets = np.frombuffer(raw, "<u4", count + 1, 4)
        if count and not bool(np.all(offsets[1:] >= offsets[:-1])):
            raise self._corrupt(f"offsets in {meta.name} decrease")
        if int(offsets[-1]) != size:
            raise self._corrupt(f"last offset {int(offsets[-1])} != data file size {size}")
        self._offsets = offsets
        self._config = self._parse_meta_config(raw[table_end:], meta)
        self._num_samples = count
        own = self._own_codec()
        if self.codec is None:
            self.codec = own
        elif own != self.codec:
            raise self._corrupt(f"meta file describes {own}, the index {self.codec}")

    def _parse_meta_config(self, raw: bytes, meta: Path) -> dict[str, Any]:
        try:
            config = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._corrupt(f"config in {meta.name} is not valid JSON: {exc}") from None
        if not isinstance(config, dict):
            raise self._corrupt(f"config in {meta.name} is not a JSON object")
        return config

    def _own_codec(self) -> RowCodec:
        try:
            return row_codec(self._config)
        except ValueError as exc:
            raise self._corrupt(f"meta config: {exc}") from None

    def sample_bytes(self, index: int) -> memoryview:
        mapped = self._ensure_open()
        n = self._num_samples
        if not -n <= index < n:
            raise IndexError(f"{self.path}: sample {index} out of range [0, {n})")
        index %= n
        offsets = self._offsets
        return memoryview(mapped)[int(offsets[index]):int(offsets[index + 1])]


def open_shard(path: str | os.PathLike, codec: SampleCodec | RowCodec | None,
               **options: Any) -> ShardReader:
    """A reader of the shard at `path` in the format `codec` decodes (MDS, a text format or a
    Parquet row group)."""
    if getattr(codec, "by_span", True) is False:
        from streaming.format.parquet_shard import ParquetShardReader

        return ParquetShardReader(path, codec, **options)  # type: ignore[arg-type]
    if isinstance(codec, RowCodec):
        return TextShardReader(path, codec, **options)
    return ShardReader(path, codec, **options)
