"""A `local` folder never serves another dataset's shards, and the cache heals: a remote's changed
index drops the shards it changed, a wiped or truncated cache is fetched again, earlier runs'
shards are adopted whatever folder layout the index uses, a refused cache_limit does not stick,
and a complete local copy serves when the remote cannot be reached. Also the clear errors for a
`local` or `remote` that cannot work."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.cache.folder.file_names import ORIGIN_FILE
from streaming.errors import (
    CacheFolderError,
    CacheLimitError,
    CacheOriginError,
    LocationError,
    ObjectNotFoundError,
    PlanError,
    StreamingError,
)
from streaming.format.index import merge_index
from tests.support.datasets import write_ids
from tests.support.epochs import epoch_in_new_process, read_ids


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two datasets whose shards have the same names and sizes but different samples."""
    return (write_ids(tmp_path / "a", 120, start=0, hashes=["sha1"]),
            write_ids(tmp_path / "b", 120, start=5000, hashes=["sha1"]))


def test_a_second_remote_never_reads_the_first_ones_shards(pair, tmp_path: Path,
                                                           capsys) -> None:
    from streaming.cli.main import main

    a, b = pair
    local = tmp_path / "cache"
    assert read_ids(StreamingDataset(remote=str(a), local=str(local))) == list(range(120))
    capsys.readouterr()
    assert main(["cache", "show", str(local), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["remote"] == str(a)
    with pytest.raises(CacheOriginError) as info:
        StreamingDataset(remote=str(b), local=str(local))
    assert str(a) in str(info.value) and str(b) in str(info.value)
    # The first remote still works, and a cleared folder takes the second one.
    assert read_ids(StreamingDataset(remote=str(a), local=str(local))) == list(range(120))
    assert main(["cache", "clear", str(local)]) == 0
    assert read_ids(StreamingDataset(remote=str(b), local=str(local))) == list(range(5000, 5120))


def test_a_changed_remote_index_drops_the_shards_it_changed(tmp_path: Path) -> None:
    remote, local = tmp_path / "remote", tmp_path / "cache"
    write_ids(remote, 120, start=0, hashes=["xxh64"])
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local))) == list(range(120))
    kept = {p.name: p.stat().st_ino for p in local.glob("shard.*.mds")}
    # Rewrite the remote: same shard names, sizes and sample counts, other samples in the
    # second half (the first half of the shards is byte-identical).
    shutil.rmtree(remote)
    with_new = list(range(60)) + list(range(9060, 9120))
    from writers.mds import MDSWriter

    with MDSWriter(columns={"id": "int", "payload": "ndarray:int32"}, out=remote,
                   size_limit=1 << 10, hashes=["xxh64"]) as w:
        for i in with_new:
            w.write({"id": i, "payload": np.full(3, i, dtype=np.int32)})
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local))) == with_new
    after = {p.name: p.stat().st_ino for p in local.glob("shard.*.mds")}
    first = sorted(kept)[0]
    assert after[first] == kept[first]  # unchanged shards are kept, not fetched again
    origin = json.loads((local / ORIGIN_FILE).read_text())
    assert origin["remote"] == str(remote)


def test_a_wiped_local_folder_is_fetched_again_in_the_same_process(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 90)
    local = tmp_path / "cache"
    keep = StreamingDataset(remote=str(remote), local=str(local))  # an open dataset, too
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local))) == list(range(90))
    shutil.rmtree(local)
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local))) == list(range(90))
    keep.close()


def test_a_truncated_or_deleted_shard_is_fetched_again(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 90, compression="zstd")
    local = tmp_path / "cache"
    ds = StreamingDataset(remote=str(remote), local=str(local), cache_limit="1mb")
    assert read_ids(ds) == list(range(90))
    shards = sorted(local.glob("shard.*.mds"))
    shards[0].unlink()
    with open(shards[1], "r+b") as f:
        f.truncate(10)
    ds = StreamingDataset(remote=str(remote), local=str(local), cache_limit="1mb")
    assert read_ids(ds) == list(range(90))
    for limit in (None, "1mb"):  # the same under a live table with and without a limit
        ds = StreamingDataset(remote=str(remote), local=str(local), cache_limit=limit)
        sorted(local.glob("shard.*.mds"))[2].unlink()
        assert read_ids(ds) == list(range(90))


def test_without_a_remote_a_missing_shard_is_named(tmp_path: Path) -> None:
    local = write_ids(tmp_path / "data", 90)
    (local / "shard.00001.mds").unlink()
    with pytest.raises(StreamingError, match=r"shard\.00001\.mds"):
        read_ids(StreamingDataset(local=str(local)))


def test_earlier_shards_are_adopted_in_part_folders(tmp_path: Path) -> None:
    """merge-index layouts (`0/shard...`, `1/shard...`): a second run under the limit the first one
    ran in is not refused: the shards the first one left count as cached shards."""
    remote = tmp_path / "remote"
    write_ids(remote / "0", 2000, start=0, compression="zstd", size_limit=1 << 14)
    write_ids(remote / "1", 2000, start=2000, compression="zstd", size_limit=1 << 14)
    merge_index(remote)
    local = tmp_path / "cache"
    shards = json.loads((remote / "index.json").read_text())["shards"]
    limit = int(0.4 * sum(shard["raw_data"]["bytes"] for shard in shards))
    first, stats = epoch_in_new_process(remote=str(remote), local=str(local), cache_limit=limit)
    assert first == list(range(4000)) and stats["downloads"] == len(shards)
    second, stats = epoch_in_new_process(remote=str(remote), local=str(local), cache_limit=limit)
    assert second == list(range(4000))
    assert stats["downloads"] <= len(shards)


def test_a_refused_cache_limit_does_not_stick(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 90)
    local = tmp_path / "cache"
    with pytest.raises(CacheLimitError):
        StreamingDataset(remote=str(remote), local=str(local), cache_limit=100)
    assert read_ids(StreamingDataset(remote=str(remote), local=str(local),
                                 cache_limit="10mb")) == list(range(90))


def test_cache_limit_must_be_positive(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 30)
    for bad in (0, -5, "0b"):
        with pytest.raises(PlanError, match="cache_limit"):
            StreamingDataset(remote=str(remote), local=str(tmp_path / "c"), cache_limit=bad)


def test_a_url_with_one_slash_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LocationError, match="s3:/bucket"):
        StreamingDataset(remote="s3:/bucket/data", local=str(tmp_path / "c"))
    with pytest.raises(LocationError, match="s3:/bucket"):
        StreamingDataset(local="s3:/bucket/data")
    assert not (tmp_path / "s3:").exists()


def test_local_that_is_a_file_or_unwritable_gets_a_typed_error(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 30)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(CacheFolderError, match="afile"):
        StreamingDataset(remote=str(remote), local=str(afile))
    with pytest.raises(CacheFolderError, match="afile"):
        StreamingDataset(remote=str(remote), local=str(afile / "below"))
    if os.geteuid() == 0:
        pytest.skip("root writes everywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(CacheFolderError, match="locked"):
            StreamingDataset(remote=str(remote), local=str(locked / "cache"))
        with pytest.raises(CacheFolderError, match="locked"):
            StreamingDataset(remote=str(remote), local=str(locked))
    finally:
        locked.chmod(0o700)


def test_a_failed_constructor_leaves_no_folders(tmp_path: Path) -> None:
    local = tmp_path / "deep" / "cache"
    with pytest.raises(ObjectNotFoundError):
        StreamingDataset(remote=str(tmp_path / "missing"), local=str(local))
    assert not (tmp_path / "deep").exists()


def test_the_default_cache_is_per_user_and_must_be_the_users_own(tmp_path: Path,
                                                                  monkeypatch) -> None:
    import tempfile

    from streaming.stream import Stream

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    remote = write_ids(tmp_path / "remote", 30)
    ds = StreamingDataset(remote=str(remote))
    root = tmp_path / "tmp" / f"mds-streaming-{os.getuid()}"
    assert Path(ds.streams[0].local).parent == root
    assert (root.stat().st_mode & 0o777) == 0o700
    assert read_ids(ds) == list(range(30))
    root.chmod(0o777)  # anyone could plant shards there now
    with pytest.raises(CacheFolderError, match="mds-streaming"):
        Stream(remote=str(remote))
    root.chmod(0o700)
    if os.geteuid() == 0:  # a folder another user owns (only root can make one)
        os.chown(root, 4321, -1)
        with pytest.raises(CacheFolderError, match="uid"):
            Stream(remote=str(remote))
        os.chown(root, os.getuid(), -1)


def test_a_cache_folder_others_can_write_warns_without_validate_hash(tmp_path: Path,
                                                                     caplog) -> None:
    remote = write_ids(tmp_path / "remote", 30, hashes=["xxh64"])
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert read_ids(StreamingDataset(remote=str(remote), local=str(shared))) == list(range(30))
    assert "writable by every user" in caplog.text and "validate_hash" in caplog.text
    caplog.clear()
    assert read_ids(StreamingDataset(remote=str(remote), local=str(shared),
                                 validate_hash="xxh64")) == list(range(30))
    assert "writable by every user" not in caplog.text


def test_a_later_process_also_refuses_the_other_remote(pair, tmp_path: Path) -> None:
    a, b = pair
    local = tmp_path / "cache"
    assert read_ids(StreamingDataset(remote=str(a), local=str(local))) == list(range(120))
    with pytest.raises(CacheOriginError, match="already caches"):
        epoch_in_new_process(remote=str(b), local=str(local))
