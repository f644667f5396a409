"""The cache's policy, pure numpy and shared by the engine, its offline simulation and `streaming
plan`: which shard to evict (Belady over the known plan), how far ahead to prefetch, the smallest
cache_limit a plan can run within, the shuffle block a limit allows, the simulated cache, and the
yardsticks (the floor and the optimum) downloads are measured against."""
