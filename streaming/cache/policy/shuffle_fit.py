"""A shuffle that fits the cache: how many samples a block shuffle may spread over at once, or
how many canonical nodes a shard-by-shard shuffle may interleave, when only some shards can be
resident. Pure (index sizes and the limit in, a sample or node count out).

A block-based shuffle (py1e, py1b, py1br) mixes the samples of the shards whose block covers
the read position, so those shards are what the readers need at the same time. When the cache
holds fewer shards than that, every read evicts a shard that the next read needs again, and the
epoch re-downloads the dataset many times over. Sizing the block to the cache keeps the in-use
set resident: each shard is then downloaded about once per epoch.

How many shards are in use at once is not one block's worth (`SPREAD`): py1e spreads each
shard over a block-wide window centred on it, and near the two ends of a node's range those
windows are shifted inside it, so 1.5 blocks' worth overlap there. py1b and py1br change every
shard at a block edge: the prefetcher fetches the next block's shards while the last ones of
this block are still read, so two blocks' worth are wanted there (py1br's blocks run up to
1.25x the block size). Plus one shard straddling an edge.
"""

from __future__ import annotations

import numpy as np

from streaming.cache.policy.minimum_limit import Footprint
from streaming.plan.shuffle import SHUFFLES

BLOCK_SHUFFLES = tuple(name for name, a in SHUFFLES.items() if a.block_based)
SHARD_SHUFFLES = tuple(name for name, a in SHUFFLES.items() if a.shards_per_canonical)
SPARE = 2  # resident shards kept out of the block: the next one fetched, one in hand-over
# Peak shards wanted at once, in blocks' worth: each shuffle's `block_spread` (streaming.plan.
# shuffle), checked on real plans in tests/cache/policy/test_fit.py and against the engine's
# downloads in tests/dataset/test_cache_block.py
SPREAD = {name: a.block_spread for name, a in SHUFFLES.items() if a.block_based}


def shards_resident(limit: int, footprint: Footprint) -> int:
    """Shards of the largest size the limit holds at once while one more is being prepared."""
    cached = footprint.resident > 0
    if not cached.any():
        return 0
    largest = int(footprint.resident[cached].max())
    in_flight = int((footprint.resident + footprint.transient)[cached].max())
    return max((int(limit) - in_flight) // max(largest, 1), 0)


def typical_samples(footprint: Footprint, samples_per_shard: np.ndarray) -> int:
    """Mean samples of the cached shards that give any (of every such shard when none is
    cached). With `samples_per_shard` the samples each shard gives the epoch, a stretch of B
    positions of the order holds about B / typical shards, whatever the mix or subsample.

    Args:
        footprint: bytes per shard (which shards are cached).
        samples_per_shard: samples each shard gives (stored, or this epoch's share).
    """
    counts = np.asarray(samples_per_shard, np.float64)
    cached = counts[(footprint.resident > 0) & (counts > 0)]
    picked = cached if len(cached) else counts[counts > 0]
    return max(round(float(picked.mean())), 1) if len(picked) else 1


def read_samples(footprint: Footprint, samples_per_shard: np.ndarray, shuffled: int = 0) -> int:
    """The stored samples of a typical cached shard (the median; of every shard when none is
    cached): what reads are sized to under a limit (`streaming.read.sizing`); in a shuffled
    epoch, `shuffled` when fewer: a read of n rows spans about n / `shuffled` shards there, and
    one sized to the stored shard would pin several times the shards a step of the plan holds
    when a subsample or a mix takes only part of each shard.

    Args:
        footprint: bytes per shard (which shards are cached).
        samples_per_shard: stored samples of each shard.
        shuffled: the samples a typical shard gives a shuffled epoch (0: not shuffled).
    """
    counts = np.asarray(samples_per_shard, np.int64)
    cached = counts[footprint.resident > 0]
    stored = max(int(np.median(cached if len(cached) else counts)), 1) if len(counts) else 1
    return min(stored, shuffled) if shuffled > 0 else stored


def side_by_side(footprint: Footprint, samples_per_shard: np.ndarray,
                 shards_per_stream: np.ndarray) -> tuple[int, int]:
    """For batching that reads each stream as a sequence of its own (stratified, per_stream,
    device_per_stream): the streams read side by side (those giving samples) and the typical
    shard of one such sequence, the harmonic mean of the streams' typical shards, so that a
    stretch of B positions in each holds as many shards in all as `streams` sequences of
    that typical shard.

    Args:
        footprint: bytes per shard (which shards are cached).
        samples_per_shard: samples each shard gives the epoch.
        shards_per_stream: shards of each stream, in order.
    """
    counts = np.asarray(samples_per_shard, np.float64)
    bounds = np.concatenate([[0], np.cumsum(shards_per_stream)]).astype(np.int64)
    typical = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if counts[a:b].sum() > 0:
            part = Footprint(footprint.resident[a:b], footprint.transient[a:b])
            typical.append(typical_samples(part, counts[a:b]))
    if not typical:
        return 1, 1
    return max(round(len(typical) / sum(1.0 / t for t in typical)), 1), len(typical)


# Peak shards a py1s/py2s plan wants at once per canonical node a node reads: each shuffle's
# `shards_per_canonical`. py1s reads one shard at a time per canonical node and py2s's windows
# straddle two, but canonical nodes of unequal length drift apart in the interleaved order, so
# shard changes overlap; tests/cache/policy/test_fit.py checks the bound on real plans.
PER_CANONICAL = {name: a.shards_per_canonical for name, a in SHUFFLES.items()
                 if a.shards_per_canonical}


def canonical_for_limit(limit: int, footprint: Footprint, default: int, nodes: int,
                        algo: str, streams: int = 1, span_shards: int = 0) -> int:
    """The canonical node count to use under `limit` for a py1s/py2s plan: the default when the
    cache holds every shard or the shards its canonical nodes use at once, else the largest
    multiple of `nodes` whose canonical nodes per node (each using PER_CANONICAL shards in
    each of the `streams` sequences it reads side by side) stay resident with SPARE and the
    `span_shards` a step of the node's readers reaches left free; never under one per node."""
    cached = footprint.resident > 0
    nodes = max(int(nodes), 1)
    if not cached.any() or algo not in PER_CANONICAL:
        return int(default)
    room = shards_resident(limit, footprint) - SPARE
    if room >= int(cached.sum()):
        return int(default)
    per_node = max(int((room - 1 - span_shards) / (PER_CANONICAL[algo] * max(int(streams), 1))),
                   1)
    return int(min(default, per_node * nodes))


def shards_in_use(block: int, typical: int, algo: str, span: int = 0) -> int:
    """Most shards of `typical` samples that readers of an `algo` plan use at once, when the
    node's readers read `span` consecutive samples of the order at a step (a batch each)."""
    return int(np.ceil((SPREAD.get(algo, 1.0) * block + span) / max(typical, 1))) + 1


def block_for_limit(limit: int, footprint: Footprint, samples_per_shard: np.ndarray,
                    default_block: int, algo: str = "py1e", sequences: int = 1,
                    typical: int | None = None, span: int = 0) -> int:
    """The shuffle block size (samples) to use under `limit`: the default when the cache holds
    every shard or the shards an `algo` plan uses at once with that block, else the largest
    block whose shards in use (`shards_in_use`) stay resident with SPARE left free; never under
    one shard's worth. A node reading `sequences` sequences at once (canonical nodes, streams
    read side by side) splits the room; `typical` overrides `typical_samples`; `span` is the
    samples of each sequence the node's readers read at one step (a batch of each rank)."""
    cached = footprint.resident > 0
    if not cached.any():
        return int(default_block)  # nothing is cached under the limit
    if typical is None:
        typical = typical_samples(footprint, samples_per_shard)
    room = shards_resident(limit, footprint) - SPARE
    if room >= int(cached.sum()):
        return int(default_block)
    sequences = max(int(sequences), 1)
    room //= sequences
    if shards_in_use(default_block, typical, algo, span) <= room:
        return int(default_block)
    fit = int(((room - 1) * typical - span) / SPREAD.get(algo, 1.0))
    if SHUFFLES[algo].centred_windows:
        # Windows over half a sequence overlap from both ends: every shard in use at once.
        fit = min(fit, int(np.asarray(samples_per_shard).sum()) // sequences // 2)
    counts = np.asarray(samples_per_shard, np.float64)[cached]
    largest = int(np.ceil(counts.max())) if len(counts) else typical
    return int(min(default_block, max(fit, typical, largest)))  # no shard over its own length
