"""The fixed facts of every shard a dataset reads, as its indexes give them: which stream owns it,
its file names, sizes, digests and compression. Read once, never changed; the live state of the
cache (what is present, pinned, being prepared) is the node's `CacheTable` instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ShardFacts:
    """Compact per-shard facts over every stream, indexed by global shard id."""

    stream_of_shard: np.ndarray  # int64 stream index per shard
    raw_bytes: np.ndarray  # int64
    zip_bytes: np.ndarray  # int64, 0 where the shard is stored raw
    basenames: tuple[str, ...]
    zip_basenames: tuple[str | None, ...]
    compression: tuple[str | None, ...]
    raw_hashes: tuple[dict, ...]
    zip_hashes: tuple[dict, ...]

    @classmethod
    def from_indexes(cls, indexes: Sequence) -> ShardFacts:
        """Concatenate the shard facts of each stream's DatasetIndex, in stream order."""
        owner = [np.full(ix.num_shards, s, np.int64) for s, ix in enumerate(indexes)]
        shards = [sh for ix in indexes for sh in ix.shards]
        return cls(
            stream_of_shard=np.concatenate(owner) if owner else np.zeros(0, np.int64),
            raw_bytes=np.concatenate([np.asarray(ix.raw_bytes, np.int64) for ix in indexes]),
            zip_bytes=np.concatenate([np.asarray(ix.zip_bytes, np.int64) for ix in indexes]),
            basenames=tuple(b for ix in indexes for b in ix.basenames),
            zip_basenames=tuple(b for ix in indexes for b in ix.zip_basenames),
            compression=tuple(c for ix in indexes for c in ix.compression),
            raw_hashes=tuple((sh.get("raw_data") or {}).get("hashes") or {} for sh in shards),
            zip_hashes=tuple((sh.get("zip_data") or {}).get("hashes") or {} for sh in shards),
        )
