"""LocalDataset: a map-style torch Dataset over an MDS directory already on local disk.

Raw shards are memory-mapped in place; compressed ones are decompressed once (atomically) into
the dataset directory, or into a cache directory when that one is read-only, and reused later.
"""

from __future__ import annotations

import hashlib
import operator
import os
import tempfile
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from streaming.errors import UnknownHashError
from streaming.format.compression import decompress_file
from streaming.format.hashing import SUPPORTED_HASHES, is_supported_hash
from streaming.format.index import read_index
from streaming.format.local_files import check_local_shards, file_size, size_error
from streaming.format.shard import ShardReader, validate_file
from streaming.format.text_shard import open_shard, place_meta
from streaming.read.open_shards import OpenShards
from streaming.util.files import has_size


class LocalDataset(Dataset):
    """Random access to the samples of the MDS dataset in `local` (or `local/split`).

    Compressed shards are decompressed into `cache_dir` if given, else beside the compressed
    file, else (read-only directory) into a per-user temporary cache.

    Args:
        local: The dataset's folder (holding index.json), read in place.
        split: Sub-folder of `local` (e.g. "train"); None: `local` itself.
        allow_unsafe_types: Allow `pkl` columns (unpickling can run code); False refuses them.
        validate_hash: Hash algorithm ("xxh64", "sha1", ...) each shard is checked with when
            first opened; None: no check. Not in the reference.
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
        check_local_shards(self.index)
        self.validate_hash = validate_hash
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.allow_unsafe_types = allow_unsafe_types
        self.samples_per_shard = self.index.samples_per_shard
        self.shard_offsets = self.index.sample_offsets
        self.num_samples = self.index.num_samples
        # Built up front so an unsafe column fails here, not later in a DataLoader worker.
        self._codec = self.index.codec(allow_unsafe_types=allow_unsafe_types)
        self._init_lookup()
        if validate_hash is not None:
            self._verify_empty_shards()

    def _init_lookup(self) -> None:
        # Python lists make the scalar lookup a C-level bisect (no numpy call overhead).
        self._ends = self.shard_offsets[1:].tolist()
        self._starts = self.shard_offsets[:-1].tolist()
        self._readers = OpenShards(self._open)

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
                reader = self._readers.get(shard)
                for row in range(count):
                    yield reader.get(row)

    def get_item(self, index: int) -> dict[str, Any]:
        """One sample by global index (negative counts from the end)."""
        i = operator.index(index)
        if i < 0:
            i += self.num_samples
        if not 0 <= i < self.num_samples:
            raise IndexError(f"sample {index} out of range for {self.root} ({self.num_samples})")
        shard = bisect_right(self._ends, i)
        reader = self._readers.get(shard)
        return reader.get(i - self._starts[shard])

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
        shards = np.searchsorted(self.shard_offsets, ids, side="right") - 1
        rows = ids - self.shard_offsets[shards]
        out = []
        for shard, row in zip(shards.tolist(), rows.tolist()):
            reader = self._readers.get(shard)
            out.append(reader.get(row))
        return out

    # DataLoader fetches a whole batch through this when the dataset defines it.
    __getitems__ = get_many

    # -- shard files --------------------------------------------------------------------------

    def _open(self, shard: int) -> ShardReader:
        reader = open_shard(
            self._raw_path(shard),
            self._codec,
            expected_samples=int(self.samples_per_shard[shard]),
            expected_bytes=int(self.index.raw_bytes[shard]),
        )
        return reader

    def _verify_empty_shards(self) -> None:
        """Open (verify, decompress, check the header of) every shard the index says is empty:
        no sample of theirs would ever be read, so a wrong count of 0 would go unnoticed."""
        for shard in np.flatnonzero(self.samples_per_shard == 0).tolist():
            self._open(shard).close()

    def _raw_path(self, shard: int) -> Path:
        """Path of the shard's raw file, decompressing it first when only the zip exists."""
        entry = self.index.shards[shard]
        size = int(self.index.raw_bytes[shard])
        in_place = self.index.raw_path(shard)
        if has_size(in_place, size):
            self._check_hash(in_place, entry["raw_data"])
            return self._with_meta(entry, in_place)
        src = self.index.zip_path(shard)
        if src is None:
            raise size_error(in_place, size, file_size(in_place))
        target = self._decompressed_dir().joinpath(*self.index.basenames[shard].split("/"))
        if not has_size(target, size):
            zip_size = int(self.index.zip_bytes[shard])
            if not has_size(src, zip_size):
                raise size_error(src, zip_size, file_size(src))
            self._check_hash(src, entry["zip_data"])
            target.parent.mkdir(parents=True, exist_ok=True)
            decompress_file(src, target, entry["compression"], expected_size=size,
                            durable=False)
        return self._with_meta(entry, target)

    def _with_meta(self, entry: dict[str, Any], data: Path) -> Path:
        """`data`, with its meta file placed beside it for a text-format (split) shard."""
        if self.index.row_codec is not None:
            place_meta(entry, self.root, data)
        return data

    def _decompressed_dir(self) -> Path:
        if self.cache_dir is not None:
            return self.cache_dir
        if os.access(self.root, os.W_OK):
            return self.root
        return _default_cache(self.root)

    def _check_hash(self, path: Path, info: dict[str, Any]) -> None:
        if self.validate_hash is not None:
            validate_file(path, info["bytes"], info.get("hashes", {}), [self.validate_hash])

    # -- pickling for DataLoader workers ------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_readers", "_ends", "_starts"):
            state.pop(key)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_lookup()


def _default_cache(root: Path) -> Path:
    """A per-user cache folder for a read-only dataset directory, keyed by its real path (in
    the user's own 0700 folder, which is refused when someone else could write to it)."""
    from streaming.cache.folder import user_cache_root

    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return user_cache_root(Path(tempfile.gettempdir())) / key
