"""A local-only compressed stream read under a cache_limit, or from a read-only folder: the
decompressed copies go to a cache folder (the folder is the stream's remote), count against the
limit and are evicted there; the user's folder is never written."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from streaming import Stream, StreamingDataset
from tests.support.datasets import write_ids
from tests.support.epochs import read_ids
from tests.support.folder_size import peak_size
from tests.support.smalldisk import small_disk


def _listing(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())}


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp dir default cache folders go under, inside this test's folder."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


def test_copies_under_a_limit_go_to_a_cache_folder_and_stay_under_it(
        tmp_path: Path, temp_dir: Path) -> None:
    data = write_ids(tmp_path / "data", 1200, compression="zstd")
    before = _listing(data)
    raw = sum(1 for name in before if name.endswith(".mds.zstd"))
    stream = Stream(local=str(data))
    ds = StreamingDataset(streams=[stream], cache_limit="24kb", shuffle=False)
    copies = stream.local_dir
    assert copies.is_relative_to(temp_dir) and stream.remote_dir == str(data)
    with peak_size(copies) as peak:
        assert read_ids(ds) == list(range(1200))
    assert 0 < peak[0] <= 24 << 10
    assert _listing(data) == before  # no copy, temp or lock file in the user's folder
    assert raw > 10 and ds.cache_stats().evictions > 0


def test_a_read_only_folder_is_read_through_a_cache_folder(tmp_path: Path, temp_dir: Path) -> None:
    source = write_ids(tmp_path / "src", 200, compression="zstd")
    with small_disk("4m") as disk:
        data = Path(shutil.copytree(source, disk / "data"))
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, timeout=30)
        before = _listing(data)
        assert read_ids(StreamingDataset(local=str(data), shuffle=False)) == list(range(200))
        assert _listing(data) == before
