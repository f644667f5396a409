"""Kept compressed shards in part folders (`0/shard...zstd`, as merge-index lays them out) are the
cache's like any other file: counted in its usage and deleted with their shard on eviction."""

from __future__ import annotations

import json
from pathlib import Path

from streaming import StreamingDataset
from streaming.format.index import merge_index
from tests.support.datasets import write_ids


def test_a_kept_zip_in_a_part_folder_is_counted_and_evicted(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    write_ids(remote / "0", 40, compression="zstd", size_limit=1 << 12)
    write_ids(remote / "1", 40, start=40, compression="zstd", size_limit=1 << 12)
    merge_index(remote)
    first = json.loads((remote / "index.json").read_text())["shards"][0]
    local = tmp_path / "cache"
    ds = StreamingDataset(remote=str(remote), local=str(local), keep_zip=True,
                          cache_limit="10mb")
    try:
        assert int(ds[0]["id"]) == 0
        raw = local / first["raw_data"]["basename"]
        zipped = local / first["zip_data"]["basename"]
        assert raw.is_file() and zipped.is_file()
        held = raw.stat().st_size + zipped.stat().st_size
        before = ds.cache_usage
        ds.evict_shard(0)
        assert not raw.exists() and not zipped.exists()
        assert before - ds.cache_usage == held
    finally:
        ds.close()
