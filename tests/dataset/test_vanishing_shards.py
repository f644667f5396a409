"""A cached shard deleted after the reader pinned it but before it opened it (a clean-up
script, another job) is fetched again, as for a shard found missing before the pin: random
access and iteration under a cache_limit both return every sample. The deletion is injected
right after the real pin returns; the open, the recovery and the download are the real ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.cache.engine.cache_engine import CacheEngine
from tests.support.datasets import write_ids
from tests.support.epochs import read_ids


@pytest.fixture
def delete_after_pin(monkeypatch: pytest.MonkeyPatch) -> dict[int, int]:
    """Unlink the file of each shard the first time the engine pins it; counts per shard."""
    deleted: dict[int, int] = {}
    pin = CacheEngine.acquire

    def acquire(self: CacheEngine, shard: int, *, wait: bool = True):
        path = pin(self, shard, wait=wait)
        if path is not None and self.cached[int(shard)] and int(shard) not in deleted:
            os.unlink(path)
            deleted[int(shard)] = 1
        return path

    monkeypatch.setattr(CacheEngine, "acquire", acquire)
    return deleted


@pytest.mark.parametrize("compression,limit", [(None, "1mb"), ("zstd", "1mb"), ("zstd", None)])
def test_iteration_fetches_a_shard_deleted_after_its_pin(
        tmp_path: Path, delete_after_pin: dict[int, int], compression: str | None,
        limit: str | None) -> None:
    remote = write_ids(tmp_path / "remote", 90, compression=compression)
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"),
                          cache_limit=limit, shuffle=False)
    assert read_ids(ds) == list(range(90))
    assert len(delete_after_pin) >= 3


def test_random_access_fetches_a_shard_deleted_after_its_pin(
        tmp_path: Path, delete_after_pin: dict[int, int]) -> None:
    remote = write_ids(tmp_path / "remote", 90)
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), cache_limit="1mb")
    try:
        assert [int(ds[i]["id"]) for i in (5, 40, 85, 6)] == [5, 40, 85, 6]
    finally:
        ds.close()
    assert len(delete_after_pin) >= 3
