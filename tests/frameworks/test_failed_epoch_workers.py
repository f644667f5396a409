"""An epoch that fails in a DataLoader worker leaves no worker process behind: by the time the
error reaches the training loop, StreamingDataLoader has shut its workers down, instead of
leaving them to torch's shutdown from the garbage collector (which waits out a 5 s join timeout
per worker)."""

from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.errors import HashMismatchError
from streaming.format.index import read_index
from tests.support.datasets import write_ids


def _corrupted(root: Path) -> tuple[Path, str]:
    """A sha1-hashed dataset whose third shard has one flipped byte, and that shard's name."""
    clean = write_ids(root / "clean", 200, compression="zstd", hashes=["sha1"])
    victim = read_index(clean / "index.json").zip_basenames[2]
    remote = root / "remote"
    shutil.copytree(clean, remote)
    body = bytearray((remote / victim).read_bytes())
    body[len(body) // 2] ^= 0xFF
    (remote / victim).write_bytes(bytes(body))
    return remote, victim


def test_a_failed_epoch_has_stopped_its_workers_when_the_error_arrives(tmp_path) -> None:
    remote, victim = _corrupted(tmp_path)
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"),
                          validate_hash="sha1", batch_size=16)
    loader = StreamingDataLoader(ds, batch_size=16, num_workers=2)
    try:
        with pytest.raises(HashMismatchError, match=victim) as info:
            for _ in loader:
                pass
        assert multiprocessing.active_children() == [], info.value  # joined, none left
    finally:
        ds.close()
