"""A cache_limit larger than the free space of the cache's disk (a real 2 MiB tmpfs, root only):
shards are evicted to make the room the disk lacks, downloads in flight included, and the epoch
returns every sample instead of raising CacheSpaceError part-way."""

from __future__ import annotations

from pathlib import Path

from streaming import StreamingDataset
from tests.dataset.test_full_disk import _zeros
from tests.support.epochs import read_ids
from tests.support.smalldisk import small_disk


def test_shards_are_evicted_for_the_room_the_disk_lacks(tmp_path: Path) -> None:
    remote = _zeros(tmp_path / "remote", samples=400)  # 10 shards of ~256 KiB raw
    with small_disk("2m") as disk:
        ds = StreamingDataset(remote=str(remote), local=str(disk / "cache"),
                              cache_limit="10mb", shuffle=False)
        ids = read_ids(ds)
        assert ids == list(range(400))
