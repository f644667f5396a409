"""Node-local shard cache: every read goes through `ShardPreparer.prepare(shard)`."""

from streaming.cache.facts import ShardFacts
from streaming.cache.prepare import ShardPreparer

__all__ = ["ShardFacts", "ShardPreparer"]
