"""The fixed facts of every shard a dataset reads, as its indexes give them: which stream owns it,
its file names, sizes, digests and compression. Read once, never changed; the live state of the
cache (what is present, pinned, being prepared) is the node's `CacheTable` instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streaming.format.index_columns import Digests, Names


@dataclass(frozen=True)
class ShardFacts:
    """Compact per-shard facts over every stream, indexed by global shard id."""

    stream_of_shard: np.ndarray  # int64 stream index per shard
    raw_bytes: np.ndarray  # int64
    zip_bytes: np.ndarray  # int64, 0 where the shard is stored raw
    basenames: Names
    zip_basenames: Names  # None where the shard is stored raw
    compression: Names  # None where the shard is stored raw
    raw_hashes: Digests  # {algorithm: digest} per shard, built on demand
    zip_hashes: Digests
    in_place: np.ndarray  # bool per shard: read from its indexed file where that lies
    decoded_bytes: np.ndarray  # int64 per shard: a reader's memory once decoded whole, or 0

    @classmethod
    def from_indexes(cls, indexes: Sequence) -> ShardFacts:
        """Concatenate the shard facts of each stream's DatasetIndex, in stream order."""
        owner = [np.full(ix.num_shards, s, np.int64) for s, ix in enumerate(indexes)]
        return cls(
            stream_of_shard=np.concatenate(owner) if owner else np.zeros(0, np.int64),
            raw_bytes=np.concatenate([np.asarray(ix.raw_bytes, np.int64) for ix in indexes]),
            zip_bytes=np.concatenate([np.asarray(ix.zip_bytes, np.int64) for ix in indexes]),
            basenames=Names.concat([ix.basenames for ix in indexes]),
            zip_basenames=Names.concat([ix.zip_basenames for ix in indexes]),
            compression=Names.concat([ix.compression for ix in indexes]),
            raw_hashes=Digests.concat([ix.raw_hashes for ix in indexes]),
            zip_hashes=Digests.concat([ix.zip_hashes for ix in indexes]),
            in_place=np.concatenate([np.full(ix.num_shards, ix.read_in_place, bool)
                                     for ix in indexes]) if indexes else np.zeros(0, bool),
            decoded_bytes=np.concatenate([ix.decoded_bytes for ix in indexes]
                                         ) if indexes else np.zeros(0, np.int64),
        )

    @property
    def fetch_bytes(self) -> np.ndarray:
        """Bytes a download of each shard moves: its compressed file's, else its raw file's."""
        return np.where(self.zip_bytes > 0, self.zip_bytes, self.raw_bytes).astype(np.int64)
