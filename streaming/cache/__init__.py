"""Node-local shard cache: every read goes through `ShardPreparer.prepare(shard)`."""

from streaming.cache.prepare import ShardPreparer, ShardTable

__all__ = ["ShardPreparer", "ShardTable"]
