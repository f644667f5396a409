"""The cache engine, the `ShardSource` the dataset reads through under a remote: plan-ordered
prefetch, pins and waits (cache_engine), room made under cache_limit and the disk (cache_space),
the cached shards' files (shard_files), and the signal a prefetch thread gives its own process's
readers (landed_signal)."""
