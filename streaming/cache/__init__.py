"""The node-local shard cache, in four parts: `folder` (what a cache folder keeps beside its
shards), `prepare` (a shard fetched, decompressed and verified), `table` (the node's live state
in shared memory) and `engine` (the `ShardSource` readers go through under a remote), with
`policy` (pure: eviction, prefetch windows, the minimum limit, the simulation) shared by the
engine and `streaming plan`. `shard_facts` holds each shard's fixed facts from the indexes."""

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.prepare.preparer import ShardPreparer
from streaming.cache.shard_facts import ShardFacts

__all__ = ["CacheEngine", "ShardFacts", "ShardPreparer"]
