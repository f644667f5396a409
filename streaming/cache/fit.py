"""A shuffle block that fits the cache: how many samples a shuffle may spread over at once when
only some shards can be resident. Pure (index sizes and the limit in, a sample count out).

A block-based shuffle (py1e, py1b, py1br, py2s) mixes the samples of the shards whose block
covers the read position, so those shards are what the readers need at the same time. When the
cache holds fewer shards than that, every read evicts a shard that the next read needs again,
and the epoch re-downloads the dataset many times over. Sizing the block to the cache keeps the
in-use set resident: each shard is then downloaded about once per epoch.
"""

from __future__ import annotations

import numpy as np

from streaming.cache.limit import Footprint

BLOCK_SHUFFLES = ("py1e", "py1b", "py1br", "py2s")
SPARE = 2  # resident shards kept out of the block: the next one fetched, one in hand-over


def shards_resident(limit: int, footprint: Footprint) -> int:
    """Shards of the largest size the limit holds at once while one more is being prepared."""
    cached = footprint.resident > 0
    if not cached.any():
        return 0
    largest = int(footprint.resident[cached].max())
    in_flight = int((footprint.resident + footprint.transient)[cached].max())
    return max((int(limit) - in_flight) // max(largest, 1), 0)


def typical_samples(footprint: Footprint, samples_per_shard: np.ndarray) -> int:
    """Median samples of the cached shards (of every shard when none is cached)."""
    counts = np.asarray(samples_per_shard, np.int64)
    cached = counts[footprint.resident > 0]
    return max(int(np.median(cached if len(cached) else counts)), 1) if len(counts) else 1


def block_for_limit(limit: int, footprint: Footprint, samples_per_shard: np.ndarray,
                    default_block: int) -> int:
    """The shuffle block size (samples) to use under `limit`: the default when the cache holds
    the default block's shards, else the samples of as many shards as stay resident with
    SPARE left free (at least one shard's worth)."""
    if not (footprint.resident > 0).any():
        return int(default_block)  # nothing is cached under the limit
    typical = typical_samples(footprint, samples_per_shard)
    active = max(shards_resident(limit, footprint) - SPARE, 1)
    return int(min(default_block, active * typical))
