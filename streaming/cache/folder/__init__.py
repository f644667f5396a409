"""What a cache folder keeps beside its shards, and the checks on it: the bookkeeping files'
names, the cache marker, the origin record (which remote the folder caches), one node per folder,
lock files a team can share, which files were verified, the parsed index shared by the node, one
index fetch per node, which cached files a new index changed, and the disk facts."""
