"""A full disk under the cache: a start-up warning when the shards to fetch need more than the
disk has free, a CacheSpaceError naming the folder and the bytes at a reservation that does not
fit (after evicting what a cache_limit allows), and ENOSPC while writing a shard becomes the same
typed error."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import numpy as np
import pytest

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.folder import disk_files as disk
from streaming.errors import CacheSpaceError
from tests.cache.helpers import open_dataset, read_in_order
from tests.support.datasets import write_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    write_dataset(src, 400, size_limit=8_000)
    return src


def test_too_little_free_space_warns_at_start_and_fails_typed(source, tmp_path, monkeypatch,
                                                             caplog) -> None:
    handle = open_dataset(str(source), str(tmp_path / "c"))
    monkeypatch.setattr(disk, "free_bytes", lambda folder: 1000)
    with caplog.at_level(logging.WARNING, logger="streaming.cache"):
        engine = CacheEngine(handle.preparer).attach()
    assert "1000 free" in caplog.text and str(tmp_path / "c") in caplog.text
    try:
        with pytest.raises(CacheSpaceError) as info:
            engine.acquire(0)
        assert info.value.errno == errno.ENOSPC
        assert str(tmp_path / "c") in str(info.value) and "needs" in str(info.value)
    finally:
        engine.close()


def test_under_a_limit_a_full_disk_evicts_first(source, tmp_path, monkeypatch) -> None:
    handle = open_dataset(str(source), str(tmp_path / "c"))
    engine = CacheEngine(handle.preparer, cache_limit="10mb")
    ids = np.arange(len(handle.locator))
    try:
        read_in_order(handle, engine, ids[:60])  # a few shards cached
        cached = int(engine.table.disk.sum())
        assert cached > 0
        # A disk that holds what is cached now plus 2000 bytes: each new shard needs evictions.
        capacity = cached + 2000
        monkeypatch.setattr(disk, "free_bytes",
                            lambda folder: capacity - int(engine.table.disk.sum()))
        assert read_in_order(handle, engine, ids) == len(ids)
        assert engine.stats().evictions > 0
    finally:
        engine.close()


def test_enospc_while_writing_a_shard_is_typed(source, tmp_path, monkeypatch) -> None:
    handle = open_dataset(str(source), str(tmp_path / "c"))

    def full(shard, raw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(handle.preparer, "_materialise", full)
    engine = CacheEngine(handle.preparer)
    try:
        with pytest.raises(CacheSpaceError, match="needs"):
            engine.acquire(0)
        assert not list((tmp_path / "c").glob("*.tmp"))
    finally:
        engine.close()
