"""The read side of an epoch: a worker's slice of the node plan turned into decoded rows, reading
shards through a `ShardSource` (the node cache engine, or `LocalSource` for local-only data)."""
