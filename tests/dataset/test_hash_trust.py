"""`validate_hash` checks every shard before its first sample is served, whichever way the file
arrived (read in place, adopted from an earlier run, downloaded), once per node per file
version; a bogus algorithm fails at construction."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.errors import HashMismatchError, IndexFileError, StreamingError, UnknownHashError
from tests.support.datasets import write_ids
from tests.support.epochs import read_ids


def _flip(path: Path) -> None:
    """Change one byte of a sample's payload (the file keeps its size and its header)."""
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_local_only_shard_with_a_changed_byte_is_refused(tmp_path: Path) -> None:
    local = write_ids(tmp_path / "data", 90, hashes=["sha1", "xxh64"])
    _flip(local / "shard.00001.mds")
    assert len(read_ids(StreamingDataset(local=str(local)))) == 90  # no hashes asked: served
    with pytest.raises(StreamingError, match=r"shard\.00001\.mds") as info:
        read_ids(StreamingDataset(local=str(local), validate_hash="xxh64"))
    assert isinstance(info.value, HashMismatchError) or isinstance(
        info.value.__cause__, HashMismatchError)


def test_an_adopted_cached_shard_with_a_flipped_bit_is_fetched_again(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 90, hashes=["sha1"])
    local = tmp_path / "cache"
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local))) == list(range(90))
    _flip(local / "shard.00002.mds")
    expected = list(range(90))
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local), validate_hash="sha1",
                                 cache_limit="1mb")) == expected
    _flip(local / "shard.00003.mds")  # also under a table that saw the shard present
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local),
                                 validate_hash="sha1")) == expected
    assert (local / "shard.00003.mds").read_bytes() == (remote / "shard.00003.mds").read_bytes()


def test_each_file_is_hashed_once_per_node(tmp_path: Path, monkeypatch) -> None:
    from streaming.cache.prepare import preparer as prepare

    local = write_ids(tmp_path / "data", 90, hashes=["xxh64"])
    hashed: list[str] = []
    real = prepare.file_hexdigest
    monkeypatch.setattr(prepare, "file_hexdigest",
                        lambda algo, path: hashed.append(Path(path).name) or real(algo, path))
    shards = len(list(local.glob("shard.*.mds")))
    for _ in range(2):
        ids = read_ids(StreamingDataset(local=str(local), validate_hash="xxh64"))
        assert ids == list(range(90))
    assert sorted(hashed) == sorted(p.name for p in local.glob("shard.*.mds"))
    assert len(hashed) == shards
    shutil.copy(local / "shard.00000.mds", tmp_path / "keep")
    _flip(local / "shard.00000.mds")  # a new version of the file is hashed again
    with pytest.raises(StreamingError, match=r"shard\.00000\.mds") as info:
        read_ids(StreamingDataset(local=str(local), validate_hash="xxh64"))
    assert isinstance(info.value, HashMismatchError) or isinstance(
        info.value.__cause__, HashMismatchError)
    assert len(hashed) > shards


def test_a_bogus_or_unrecorded_algorithm_fails_at_construction(tmp_path: Path) -> None:
    local = write_ids(tmp_path / "data", 30, hashes=["sha1"])
    with pytest.raises(UnknownHashError, match="nope"):
        StreamingDataset(local=str(local), validate_hash="nope")
    with pytest.raises(IndexFileError, match="xxh64"):
        StreamingDataset(local=str(local), validate_hash="xxh64")
    with pytest.raises(UnknownHashError, match="nope"):
        StreamingDataset(remote=str(local), local=str(tmp_path / "c"), validate_hash="nope")


def test_local_dataset_refuses_a_bogus_algorithm_at_construction(tmp_path: Path) -> None:
    from streaming import LocalDataset

    local = write_ids(tmp_path / "data", 30, hashes=["sha1"])
    with pytest.raises(UnknownHashError, match="nope"):
        LocalDataset(local, validate_hash="nope")


def test_adopted_shards_are_hashed_once_per_node_with_workers(tmp_path: Path,
                                                              monkeypatch) -> None:
    """Two DataLoader workers (forked processes) and the training process share one node:
    every adopted shard is hashed once in all, not once per process."""
    from torch.utils.data import DataLoader

    from streaming.cache.prepare import preparer as prepare

    remote = write_ids(tmp_path / "remote", 400, hashes=["xxh64"])
    local = tmp_path / "cache"
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local))) == list(range(400))
    log = tmp_path / "hashed"
    real = prepare.file_hexdigest

    def logged(algo, path):
        with open(log, "a") as f:
            f.write(f"{Path(path).name}\n")
        return real(algo, path)

    monkeypatch.setattr(prepare, "file_hexdigest", logged)  # forked workers inherit it
    ds = StreamingDataset(remote=str(remote), local=str(local), validate_hash="xxh64")
    try:
        loader = DataLoader(ds, batch_size=None, num_workers=2)
        assert sorted(int(s["id"]) for s in loader) == list(range(400))
    finally:
        ds.close()
    hashed = log.read_text().split()
    assert sorted(hashed) == sorted(p.name for p in local.glob("shard.*.mds"))
