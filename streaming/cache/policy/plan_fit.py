"""Fitting the plan to the cache: config + world + shard footprints + cache limit in; the plan
config a node can run within the limit, the shard size reads are fitted to (see
`streaming.read.sizing`) and the warnings to give out. Pure (no shared memory, no files, no
logging): the dataset logs the warnings it gets back.

A block shuffle reads its block's shards at once and py1s/py2s one or two shards per canonical
node; shards evicted while still in use are downloaded again and again. So when the user left
the block size (or the canonical node count) unset and the default is more than the cache
holds, a smaller one is chosen; a value the user set is kept, with a warning when too big.
Only the config and the index decide, so every node picks the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from streaming.cache.policy.cache_limit import CacheLimit
from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.policy.shuffle_fit import (
    BLOCK_SHUFFLES,
    SHARD_SHUFFLES,
    block_for_limit,
    canonical_for_limit,
    read_samples,
    side_by_side,
    typical_samples,
)
from streaming.format.parquet_decoded import DECODED_SETTING
from streaming.plan import PlanConfig, World
from streaming.plan.batching import BATCHINGS

# Of the decoded row groups' room, the share a plan's row groups in use may fill: Arrow holds a
# dictionary-encoded column in up to about twice the uncompressed size the index records.
DECODED_SHARE = 0.5


@dataclass(frozen=True)
class PlanFit:
    """What fitting decided: the config to plan with; `read_shard`, the samples of a typical
    shard when reads are sized to half of one (0: reads stay large, pinning each shard once
    per read); and the warnings for the user."""

    config: PlanConfig
    read_shard: int = 0
    warnings: tuple[str, ...] = ()


def fit_plan(config: PlanConfig, world: World, footprint: Footprint | None,
             cache_limit: CacheLimit | None, other_bytes: int = 0,
             decoded: Footprint | None = None, decoded_room: int = 0) -> PlanFit:
    """The plan config with a shuffle the cache can hold, and whose row groups in use a reading
    process can keep decoded (the config itself when both fit).

    Args:
        config: the plan config as given.
        world: the topology.
        footprint: bytes per shard in the cache (None: no cache).
        cache_limit: the limit this process was given (None: none); every process of a job
            is given the same, so every node fits the same plan.
        other_bytes: what the cache folders hold beside the shards (index files,
            bookkeeping), from the indexes alone so that every node fits the same plan.
        decoded: bytes per shard a reading process holds once it decodes it whole (Parquet
            row groups; 0 for shards read row by row; None: none is).
        decoded_room: bytes of decoded shards each reading process keeps.
    """
    fitted = _fit_cache(config, world, footprint, cache_limit, other_bytes)
    if decoded is None or decoded_room <= 0 or not (decoded.resident > 0).any():
        return fitted
    return fit_decoding(config, fitted, world, decoded, decoded_room)


def _fit_cache(config: PlanConfig, world: World, footprint: Footprint | None,
               cache_limit: CacheLimit | None, other_bytes: int) -> PlanFit:
    """`fit_plan` to the cache alone."""
    if cache_limit is None or footprint is None:
        return PlanFit(config)
    per_shard = config.epoch_samples_per_shard
    typical = typical_samples(footprint, per_shard)
    reads = read_samples(footprint, config.samples_per_shard, typical if config.shuffle else 0)
    if not config.shuffle:
        return PlanFit(config, reads)  # shards in order: one or two in use at a time
    limit = cache_limit.room_for_shards(other_bytes)
    sequence_shard, streams = typical, 1
    if BATCHINGS[config.batching_method].stream_shaped:
        sequence_shard, streams = side_by_side(footprint, per_shard, config.shards_per_stream)
    if config.shuffle_algo in BLOCK_SHUFFLES:
        canonical = config.canonical_nodes(world)
        default = config.block_size(canonical)
        sequences = -(-canonical // world.num_groups) * streams  # read by one node at once
        span = world.ranks_per_node * config.device_batch()  # a batch of each rank at a step
        fit = block_for_limit(limit, footprint, per_shard, default, config.shuffle_algo,
                              sequences, typical=sequence_shard, span=span)
        return _keep_or_fit(
            config, "shuffle_block_size", fit, default, reads,
            too_big=f"shuffle_block_size={config.shuffle_block_size} is more than "
                    f"cache_limit={cache_limit} can hold ({fit} samples): shards evicted "
                    "within a block are downloaded again, several times per epoch each; a "
                    f"block of at most {fit} samples, or no shuffle_block_size, avoids it",
            fitted=f"cache_limit={cache_limit} holds only part of a shuffle block: "
                   f"shuffling over blocks of {fit} samples (about {_shards(fit, sequence_shard)}"
                   f" shards of this epoch) instead of {default} (about "
                   f"{_shards(default, sequence_shard)}), so shards are not fetched again "
                   "within a block: a sample moves at most about one block from its shard's "
                   "place (pass shuffle_block_size to choose)")
    if config.shuffle_algo in SHARD_SHUFFLES:
        default = config.canonical_nodes(world)
        span_shards = -(-world.ranks_per_node * config.device_batch() // sequence_shard)
        fit = canonical_for_limit(limit, footprint, default, world.num_groups,
                                  config.shuffle_algo, streams, span_shards)
        return _keep_or_fit(
            config, "num_canonical_nodes", fit, default, reads,
            too_big=f"num_canonical_nodes={config.num_canonical_nodes} with shuffle_algo="
                    f"{config.shuffle_algo!r} reads more shards at once than cache_limit="
                    f"{cache_limit} holds: shards evicted while still in use are downloaded "
                    f"again; at most {fit} avoids it",
            fitted=f"cache_limit={cache_limit} holds the shards of only {fit} of {default} "
                   f"canonical nodes at once: {config.shuffle_algo} interleaves {fit} "
                   "instead, so shards are not fetched again while in use (pass "
                   "num_canonical_nodes to choose)")
    return PlanFit(config)  # naive: samples from anywhere in the epoch


def fit_decoding(given: PlanConfig, fitted: PlanFit, world: World, decoded: Footprint,
                 room: int) -> PlanFit:
    """`fitted` (the plan fitted to the cache) with a shuffle whose row groups in use fit in
    DECODED_SHARE of `room`, the decoded row groups each reading process keeps: a shuffle
    spread over more of them than that decodes each one again for nearly every read.

    Args:
        given: the plan config as the user gave it (what they set is kept, with a warning).
        fitted: the plan fitted to the cache so far.
        world: the topology.
        decoded: bytes per shard once decoded whole (0 for shards read row by row).
        room: bytes of decoded shards a reading process keeps.
    """
    config = fitted.config
    if not config.shuffle:
        return fitted
    per_shard = config.epoch_samples_per_shard
    limit = int(room * DECODED_SHARE)
    sequence_shard, streams = typical_samples(decoded, per_shard), 1
    if BATCHINGS[config.batching_method].stream_shaped:
        sequence_shard, streams = side_by_side(decoded, per_shard, config.shards_per_stream)
    what = (f"{_mib(room)} of decoded Parquet row groups per reading process "
            f"({DECODED_SETTING})")
    if config.shuffle_algo in BLOCK_SHUFFLES:
        canonical = config.canonical_nodes(world)
        current = config.block_size(canonical)
        sequences = -(-canonical // world.num_groups) * streams
        span = world.ranks_per_node * config.device_batch()
        fit = block_for_limit(limit, decoded, per_shard, current, config.shuffle_algo,
                              sequences, typical=sequence_shard, span=span)
        too_big = (f"shuffle_block_size={given.shuffle_block_size} spans more row groups than "
                   f"{what} hold: each is decoded again for nearly every read; a block of "
                   f"at most {fit} samples, or a larger {DECODED_SETTING}, avoids it")
        fitted_text = (f"{what} hold fewer row groups than a shuffle block spans: shuffling "
                       f"over blocks of {fit} samples (about {_shards(fit, sequence_shard)} "
                       f"row groups) instead of {current} (about "
                       f"{_shards(current, sequence_shard)}), so none is decoded again within "
                       f"a block (a larger {DECODED_SETTING}, or shuffle_block_size, chooses)")
        return _narrowed(fitted, "shuffle_block_size", given.shuffle_block_size, fit, current,
                         too_big, fitted_text)
    if config.shuffle_algo in SHARD_SHUFFLES:
        current = config.canonical_nodes(world)
        span_shards = -(-world.ranks_per_node * config.device_batch() // sequence_shard)
        fit = canonical_for_limit(limit, decoded, current, world.num_groups,
                                  config.shuffle_algo, streams, span_shards)
        too_big = (f"num_canonical_nodes={given.num_canonical_nodes} with shuffle_algo="
                   f"{config.shuffle_algo!r} reads more row groups at once than {what} hold: "
                   f"each is decoded again for nearly every read; at most {fit} avoids it")
        fitted_text = (f"{what} hold the row groups of only {fit} of {current} canonical nodes at "
                       f"once: {config.shuffle_algo} interleaves {fit} instead (a larger "
                       f"{DECODED_SETTING}, or num_canonical_nodes, chooses)")
        return _narrowed(fitted, "num_canonical_nodes", given.num_canonical_nodes, fit,
                         current, too_big, fitted_text)
    return fitted


def _narrowed(fitted: PlanFit, field: str, given: int | None, fit: int, current: int,
              too_big: str, fitted_text: str) -> PlanFit:
    """`fitted` with `field` lowered from `current` to `fit` and `fitted_text` added to its
    warnings, unless it fits already or the user set it (then only `too_big`)."""
    if fit >= current:
        return fitted
    if given is not None:
        return dataclasses.replace(fitted, warnings=(*fitted.warnings, too_big))
    config = dataclasses.replace(fitted.config, **{field: fit})
    return dataclasses.replace(fitted, config=config, warnings=(*fitted.warnings, fitted_text))


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.0f} MiB"


def _keep_or_fit(config: PlanConfig, field: str, fit: int, default: int, read_shard: int, *,
                 too_big: str, fitted: str) -> PlanFit:
    """`field` set to `fit` when the user left it unset and the default is more than the
    cache holds; a value the user set is kept, with large reads when it is more than `fit`
    (`read_shard`: the shard reads are sized to otherwise)."""
    given = getattr(config, field)
    if given is not None:
        if given > fit:
            return PlanFit(config, 0, (too_big,))
        return PlanFit(config, read_shard)
    if fit >= default:
        return PlanFit(config, read_shard)
    return PlanFit(dataclasses.replace(config, **{field: fit}), read_shard, (fitted,))


def _shards(block: int, typical: int) -> str:
    """How many shards of `typical` samples a block of `block` samples spans, as text."""
    return f"{block / max(typical, 1):.1f}"
