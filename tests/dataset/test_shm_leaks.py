"""Shared memory a dataset leaves: none once it is closed, however its epochs ended. Listings of
a private shared-memory folder (STREAMING_SHM_DIR, inherited by the DataLoader workers) before
and after."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from streaming import StreamingDataset
from streaming.errors import HashMismatchError
from tests.support.datasets import write_ids
from tests.support.loaders import drain


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setenv("STREAMING_SHM_DIR", str(folder))
    return folder


def test_close_removes_the_cache_segment(tmp_path: Path, shm: Path) -> None:
    remote = write_ids(tmp_path / "remote", 90, compression="zstd")
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), cache_limit="1mb")
    assert len([s for s in ds]) == 90
    assert any(name.endswith("_cache") for name in os.listdir(shm))
    ds.close()
    assert sorted(os.listdir(shm)) == []
    assert ds.cache_stats().downloads > 0  # the counters as they were at close
    assert sorted(os.listdir(shm)) == []


def _failed_epoch(ds: StreamingDataset) -> type[BaseException] | None:
    """The type of the error an epoch through two DataLoader workers ends with (the error
    itself is not kept: its traceback would keep the loader and its workers alive)."""
    try:
        drain(DataLoader(ds, num_workers=2, batch_size=None))
    except Exception as exc:
        return type(exc)
    return None


def _segments(shm: Path) -> list[str]:
    """The segments in `shm`; a `.lock` file is there only while some process holds that lock
    (a worker of the failed loader still exiting, its prefetch threads), so it is not counted."""
    return sorted(name for name in os.listdir(shm) if not name.endswith(".lock"))


def test_failed_epochs_with_workers_leave_no_segment(tmp_path: Path, shm: Path) -> None:
    remote = write_ids(tmp_path / "remote", 200, compression="zstd")
    bad = remote / "shard.00003.mds.zstd"
    good = bad.read_bytes()
    bad.write_bytes(b"garbage" + good[7:])
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), cache_limit="1mb",
                          shuffle=False, batch_size=1)
    counts = []
    for _ in range(2):
        # the damaged shard's digest is checked before it is decompressed (a folder remote)
        assert _failed_epoch(ds) is HashMismatchError
        counts.append(_segments(shm))
    assert counts[0] == counts[1]
    gc.collect()  # the failed epochs' loaders, and so their workers, are gone
    ds.close()
    assert sorted(os.listdir(shm)) == []
