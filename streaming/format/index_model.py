"""`DatasetIndex`: what one index.json says, as columns (no Python object per shard)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import ArgumentError
from streaming.format.encodings import get_encoding
from streaming.format.index_columns import Digests, Names
from streaming.format.rows import RowCodec
from streaming.format.sample import SampleCodec


@dataclass(frozen=True, eq=False)
class DatasetIndex:
    """One parsed index.json as columns: per-shard numpy arrays for planning, the shards' file
    names, codecs and digests as `Names`/`Digests` columns, and the entries themselves (built
    on demand from a template when the index was read by the vectorised scan).

    Args:
        shards: the shard entries (a sequence of dicts).
        samples_per_shard: int64 samples per shard.
        raw_bytes: int64 raw file size per shard.
        zip_bytes: int64 compressed file size per shard (0 where stored raw).
        basenames: raw file name per shard.
        zip_basenames: compressed file name per shard (None where stored raw).
        compression: codec per shard (None where stored raw).
        raw_hashes: {algorithm: digest} of each raw file.
        zip_hashes: {algorithm: digest} of each compressed file.
        columns: column name -> encoding.
        source: the index's path or URL (for messages).
        root: the folder basenames are relative to.
        extra: the document's other top-level keys.
        row_codec: the text formats' row codec (None: MDS).
    """

    shards: Sequence[dict]
    samples_per_shard: np.ndarray
    raw_bytes: np.ndarray
    zip_bytes: np.ndarray
    basenames: Names
    zip_basenames: Names
    compression: Names
    raw_hashes: Digests
    zip_hashes: Digests
    columns: dict[str, str]
    source: str = ""
    root: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    row_codec: RowCodec | None = None  # the text formats' rows (None: MDS)
    sample_offsets: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts = np.zeros(len(self.samples_per_shard) + 1, np.int64)
        np.cumsum(self.samples_per_shard, out=starts[1:])
        object.__setattr__(self, "sample_offsets", starts)

    @property
    def num_samples(self) -> int:
        """Total samples over every shard."""
        return int(self.sample_offsets[-1])

    @property
    def num_shards(self) -> int:
        """Number of shard entries (including empty shards)."""
        return len(self.samples_per_shard)

    @property
    def format(self) -> str:
        """Shard format: `mds`, or a text format (`json`, `csv`, `tsv`, `xsv`)."""
        return "mds" if self.row_codec is None else self.row_codec.format

    @property
    def read_in_place(self) -> bool:
        """Whether the shards are read from the indexed files where those lie (Parquet files on
        a filesystem), so that a cache holds none of their bytes."""
        return self.row_codec is not None and self.row_codec.in_place is not None

    @functools.cached_property
    def decoded_bytes(self) -> np.ndarray:
        """int64 bytes each shard holds in a reading process once decoded whole: a Parquet row
        group's projected columns decompressed (twice the bytes fetched where the index does
        not record it); 0 for shards whose rows are read without decoding the shard (MDS and
        the text formats)."""
        if self.format != "parquet":
            return np.zeros(self.num_shards, np.int64)
        fetched = np.asarray(self.raw_bytes, np.int64)
        return np.array([int(entry.get("decoded_bytes") or 2 * size) for entry, size
                         in zip(self.shards, fetched.tolist())], np.int64)

    @property
    def column_sizes(self) -> list[int | None]:
        """Fixed byte size per column (None for variable), in on-disk order."""
        if self.row_codec is not None:
            return self.row_codec.column_sizes
        return [get_encoding(enc).size for enc in self.columns.values()]

    def codec(self, *, allow_unsafe_types: bool = False) -> SampleCodec | RowCodec:
        """A SampleCodec for this dataset's columns (UnsafeTypeError for pkl unless allowed),
        or the row codec of a text format."""
        if self.row_codec is not None:
            return self.row_codec
        return SampleCodec(
            list(self.columns), list(self.columns.values()), allow_unsafe_types=allow_unsafe_types
        )

    def locate(self, sample_ids: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Map global sample ids to (shard index, row within shard), vectorised."""
        ids = np.asarray(sample_ids, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_samples):
            raise IndexError(f"sample id out of range [0, {self.num_samples}) in {self.source}")
        shard = np.searchsorted(self.sample_offsets, ids, side="right") - 1
        return shard, ids - self.sample_offsets[shard]

    def raw_path(self, shard: int) -> Path:
        """Local path of shard `shard`'s raw file (needs `root`)."""
        return self._resolve(self.basenames[shard])

    def zip_path(self, shard: int) -> Path | None:
        """Local path of shard `shard`'s compressed file, or None if it is not compressed."""
        name = self.zip_basenames[shard]
        return None if name is None else self._resolve(name)

    def _resolve(self, basename: str) -> Path:
        if self.root is None:
            raise ArgumentError(f"index {self.source} was parsed without a root folder")
        return self.root.joinpath(*basename.split("/"))
