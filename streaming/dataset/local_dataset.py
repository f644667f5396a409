"""LocalDataset: a map-style torch Dataset over an MDS directory already on local disk.

Raw shards are memory-mapped in place; compressed ones are decompressed once (atomically) into
the dataset directory, or into a cache directory when that one is read-only, and reused later.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from streaming.dataset.catalog import Catalog
from streaming.errors import UnknownHashError
from streaming.format.hashing import SUPPORTED_HASHES, is_supported_hash
from streaming.format.index import DatasetIndex, read_index
from streaming.format.local_files import check_local_shards
from streaming.read.row_reader import RowReader
from streaming.stream import Stream
from streaming.util.files import has_size

PREPARE_AHEAD = 1  # samples a LocalDataset prepares ahead: it has no planned order to follow


class LocalDataset(Dataset):
    """Random access to the samples of the MDS dataset in `local` (or `local/split`).

    Shards are located, made ready and opened by the same code as `StreamingDataset`'s
    local-only streams. Compressed shards are decompressed into `cache_dir` if given, else
    beside the compressed file, else (read-only directory) into a per-user temporary cache.

    Args:
        local: The dataset's folder (holding index.json), read in place.
        split: Sub-folder of `local` (e.g. "train"); None: `local` itself.
        allow_unsafe_types: Allow `pkl` columns (unpickling can run code); False refuses them.
        validate_hash: Hash algorithm ("xxh64", "sha1", ...) each shard is checked with
            before its first use (once per file version on the node); None: no check. Not in
            the reference.
        cache_dir: Folder for decompressed copies of compressed shards; None: as above. Not
            in the reference.
    """

    def __init__(
        self,
        local: str | Path,
        split: str | None = None,
        *,
        allow_unsafe_types: bool = False,
        validate_hash: str | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.root = Path(local) / split if split else Path(local)
        self.index = read_index(self.root / "index.json")
        if validate_hash is not None and not is_supported_hash(validate_hash):
            raise UnknownHashError(
                f"validate_hash={validate_hash!r} is not a hash algorithm this library knows; "
                f"use one of {sorted(SUPPORTED_HASHES)} that the index records")
        self.validate_hash = validate_hash
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.allow_unsafe_types = allow_unsafe_types
        self.samples_per_shard = self.index.samples_per_shard
        self.shard_offsets = self.index.sample_offsets
        self.num_samples = self.index.num_samples
        stream = self._stream()
        if stream.remote_dir is not None:  # the catalog checks the shards of local streams
            check_local_shards(self.index)
        self.catalog = Catalog.of([stream], [self.index], allow_unsafe_types=allow_unsafe_types)
        self.rows = RowReader(self.catalog, None, PREPARE_AHEAD, 0)
        self._locator, self._readers = self.catalog.locator, self.rows.readers  # for ds[i]
        if validate_hash is not None:
            self._verify_empty_shards()

    def _stream(self) -> Stream:
        """The dataset as a stream: read in place, or, when some shard is only compressed and
        must be decompressed elsewhere (`cache_dir`, or a read-only folder), a stream whose
        remote is the folder and whose cache is that place."""
        target = self._decompressed_dir()
        if target == self.root or _all_raw(self.index):
            return Stream(local=self.root, validate_hash=self.validate_hash)
        return Stream(remote=self.root.resolve(), local=target, validate_hash=self.validate_hash)

    @property
    def size(self) -> int:
        """Number of samples (the name the MDS ecosystem uses)."""
        return self.num_samples

    @property
    def columns(self) -> dict[str, str]:
        """Column name -> encoding, as written in the index."""
        return dict(self.index.columns)

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.get_many(np.arange(*index.indices(self.num_samples)))
        if isinstance(index, (list, tuple, np.ndarray)):
            return self.get_many(index)
        return self.get_item(index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every sample in order, shard by shard (skips the per-sample shard lookup)."""
        for shard, count in enumerate(self.samples_per_shard.tolist()):
            if count:
                reader = self.rows.reader(shard)
                for row in range(count):
                    yield reader.get(row)

    def get_item(self, index: int) -> dict[str, Any]:
        """One sample by global index (negative counts from the end)."""
        try:
            shard, row = self._locator[index]
        except IndexError:
            raise IndexError(f"sample {index} out of range for {self.root} "
                             f"({self.num_samples})") from None
        return self._readers.get(shard).get(row)

    def get_many(self, indices: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """Samples for an array of global indices, mapped to shards in one vectorised pass."""
        ids = np.asarray(indices)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"sample indices must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64, copy=False).ravel()
        ids = np.where(ids < 0, ids + self.num_samples, ids)
        bad = (ids < 0) | (ids >= self.num_samples)
        if bad.any():
            raise IndexError(
                f"sample {int(ids[bad][0])} out of range for {self.root} ({self.num_samples})"
            )
        shards, rows = self.rows.locate(ids)
        reader = self._readers.get
        return [reader(shard).get(row) for shard, row in zip(shards.tolist(), rows.tolist())]

    # DataLoader fetches a whole batch through this when the dataset defines it.
    __getitems__ = get_many

    def _verify_empty_shards(self) -> None:
        """Open (verify, decompress, check the header of) every shard the index says is empty:
        no sample of theirs would ever be read, so a wrong count of 0 would go unnoticed."""
        for shard in np.flatnonzero(self.samples_per_shard == 0).tolist():
            self.rows.open_prepared(shard).close()

    def _decompressed_dir(self) -> Path:
        if self.cache_dir is not None:
            return self.cache_dir
        if os.access(self.root, os.W_OK):
            return self.root
        return _default_cache(self.root)


def _all_raw(index: DatasetIndex) -> bool:
    """Whether every shard's raw file is in the dataset folder (nothing to decompress)."""
    return all(has_size(index.raw_path(shard), int(index.raw_bytes[shard]))
               for shard in range(index.num_shards))


def _default_cache(root: Path) -> Path:
    """A per-user cache folder for a read-only dataset directory, keyed by its real path (in
    the user's own 0700 folder, which is refused when someone else could write to it)."""
    from streaming.cache.folder.folder_checks import user_cache_root

    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return user_cache_root(Path(tempfile.gettempdir())) / key
