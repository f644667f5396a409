"""The node's live cache state in shared memory: the table every process using the same cache
folders maps, each reader's slot and horizon in it, this process's mappings, and the counters
users see."""
