"""Local compressed data on a disk that fills up (a real tmpfs, root only): the typed error
names the file, and no temporary file stays in the user's folder, now or after a dead run."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.errors import DiskFullError
from tests.support.epochs import read_ids
from tests.support.smalldisk import small_disk
from writers.mds import MDSWriter


def _zeros(out: Path, samples: int = 400) -> Path:
    """A zstd dataset of ~8 MB raw that compresses to a few KB."""
    with MDSWriter(columns={"id": "int", "blob": "bytes"}, out=str(out), compression="zstd",
                   size_limit=1 << 18) as writer:
        for i in range(samples):
            writer.write({"id": i, "blob": bytes(20_000)})
    return out


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".lock")))


def test_a_full_disk_names_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    source = _zeros(tmp_path / "src")
    with small_disk("2m") as disk:
        data = Path(shutil.copytree(source, disk / "data"))
        with pytest.raises(DiskFullError) as info:
            read_ids(StreamingDataset(local=str(data), shuffle=False))
        assert info.value.errno == errno.ENOSPC
        assert str(data) in str(info.value) and ".mds" in str(info.value)
        assert _temps(data) == []


def test_temp_files_a_dead_run_left_in_place_are_removed(tmp_path: Path) -> None:
    data = _zeros(tmp_path / "data", samples=40)
    planted = [".shard.00000.mds.1a2b3c4d.tmp", ".shard.00000.mds.prep.lock"]
    for name in planted:
        (data / name).write_bytes(b"")
    keep = data / ".shard.00000.mds.notes"  # not a name this library writes
    keep.write_bytes(b"x")
    assert read_ids(StreamingDataset(local=str(data), shuffle=False)) == list(range(40))
    assert _temps(data) == [] and keep.exists()
    assert np.all([(data / n).exists() for n in ("shard.00000.mds.zstd", "index.json")])
