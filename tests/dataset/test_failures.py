"""A failure surfaces as its root cause's type with the failing worker's message, whatever the
thread timing, and it does not poison the dataset: once the cause is gone, the next epoch runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from streaming import StreamingDataset
from streaming.errors import HashMismatchError, ObjectNotFoundError, ShardCorruptError
from tests.support.datasets import write_ids
from tests.support.loaders import drain

N = 300


def _corrupt(path: Path) -> bytes:
    original = path.read_bytes()
    data = bytearray(original)
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    return original


def _ids(dataset, **loader) -> list[int]:
    if not loader:
        return sorted(int(s["id"]) for s in dataset)
    return sorted(int(i) for batch in drain(DataLoader(dataset, batch_size=10, **loader))
                  for i in batch["id"])


@pytest.mark.parametrize("workers", [0, 2])
def test_hash_mismatch_is_always_a_hash_mismatch(tmp_path, workers):
    remote = write_ids(tmp_path / "remote", N, compression="zstd", hashes=["sha1"])
    _corrupt(remote / "shard.00003.mds.zstd")
    for attempt in range(6 if workers == 0 else 2):
        local = tmp_path / f"cache{attempt}"
        dataset = StreamingDataset(remote=str(remote), local=str(local), batch_size=10,
                                   validate_hash="sha1", predownload=64)
        with pytest.raises(HashMismatchError, match=r"shard\.00003\.mds\.zstd"):
            _ids(dataset, num_workers=workers) if workers else _ids(dataset)


@pytest.mark.parametrize("read_in_place", [False, True])
def test_missing_shard_is_always_object_not_found(tmp_path, read_in_place):
    remote = write_ids(tmp_path / "remote", N)
    for attempt in range(6):
        where = {"local": str(remote)} if read_in_place else {
            "remote": str(remote), "local": str(tmp_path / f"c{attempt}")}
        dataset = StreamingDataset(**where, batch_size=10, predownload=64)
        moved = remote / "shard.00002.mds"
        moved.rename(tmp_path / "aside")
        try:
            with pytest.raises(ObjectNotFoundError, match=r"shard\.00002\.mds"):
                _ids(dataset)
        finally:
            (tmp_path / "aside").rename(moved)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failed_epoch_does_not_poison_the_dataset(tmp_path, workers):
    remote = write_ids(tmp_path / "remote", N, compression="zstd", hashes=["sha1"])
    shard = remote / "shard.00001.mds.zstd"
    original = _corrupt(shard)
    dataset = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), batch_size=10,
                               validate_hash="sha1")
    with pytest.raises(HashMismatchError):
        _ids(dataset, num_workers=workers) if workers else _ids(dataset)
    shard.write_bytes(original)
    for _ in range(2):
        got = _ids(dataset, num_workers=workers) if workers else _ids(dataset)
        assert got == list(range(N))


def test_a_local_shard_truncated_after_construction_is_corrupt_and_named(tmp_path):
    """As in LocalDataset (the same preparing code): present with the wrong size is a corrupt
    shard, with both sizes, not a missing one."""
    root = write_ids(tmp_path / "data", N)
    dataset = StreamingDataset(local=str(root), batch_size=10)
    path = root / "shard.00002.mds"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ShardCorruptError, match=rf"shard\.00002\.mds.*{size - 1}.*{size}"):
        _ids(dataset)


def test_a_failed_local_epoch_recovers_after_the_file_is_back(tmp_path):
    root = write_ids(tmp_path / "data", N)
    dataset = StreamingDataset(local=str(root), batch_size=10)
    shutil.move(root / "shard.00002.mds", tmp_path / "aside")
    with pytest.raises(ObjectNotFoundError):
        _ids(dataset)
    shutil.move(tmp_path / "aside", root / "shard.00002.mds")
    assert _ids(dataset) == list(range(N))
