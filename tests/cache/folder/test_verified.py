"""The node's record of files already checked against their digests: a match is remembered per
file version, a changed or replaced file is not trusted, and the records stay proportional to
the shards however often they are fetched again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.cache.folder import verified_files as verified
from streaming.coord.shm_files import ENV_DIR


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    monkeypatch.setenv(ENV_DIR, str(shm))
    return shm / f"mds-verified-{os.getuid()}"


def test_a_match_is_remembered_for_that_file_version_only(tmp_path: Path, records: Path):
    shard = tmp_path / "data" / "shard.00000.mds"
    shard.parent.mkdir()
    shard.write_bytes(b"x" * 64)
    info = os.stat(shard)
    assert not verified.is_verified(shard, info, "sha1")
    verified.mark_verified(shard, "sha1", info)
    assert verified.is_verified(shard, os.stat(shard), "sha1")
    assert not verified.is_verified(shard, os.stat(shard), "xxh64")  # per algorithm
    shard.write_bytes(b"y" * 64)  # same size, new content: a new version (the clock may not
    os.utime(shard, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))  # tick between writes)
    assert not verified.is_verified(shard, os.stat(shard), "sha1")
    replaced = tmp_path / "data" / "other"
    replaced.write_bytes(b"x" * 64)
    os.replace(replaced, shard)  # a new file under the same name
    assert not verified.is_verified(shard, os.stat(shard), "sha1")


def test_a_file_changed_while_it_was_hashed_is_not_remembered(tmp_path: Path, records: Path):
    shard = tmp_path / "shard.mds"
    shard.write_bytes(b"a" * 16)
    before = os.stat(shard)
    shard.write_bytes(b"b" * 32)  # another size: a new version whatever the clock says
    verified.mark_verified(shard, "sha1", before)
    assert not verified.is_verified(shard, os.stat(shard), "sha1")
    assert not verified.is_verified(shard, before, "sha1")


def test_records_stay_proportional_to_the_shards(tmp_path: Path, records: Path):
    folder = tmp_path / "cache"
    folder.mkdir()
    shards = [folder / f"shard.{i:05d}.mds" for i in range(5)]
    for _ in range(60):  # every shard evicted and fetched again, many times over
        for shard in shards:
            shard.unlink(missing_ok=True)
            shard.write_bytes(os.urandom(32))
            verified.mark_verified(shard, "sha1")
    logs = list(records.iterdir())
    assert len(logs) == 1  # one log per (folder, algorithm), not one record per file
    lines = logs[0].read_text().splitlines()
    assert len(lines) <= verified.COMPACT_FACTOR * 8 + 1
    assert all(verified.is_verified(s, os.stat(s), "sha1") for s in shards)


def test_an_untrusted_record_folder_remembers_nothing(tmp_path: Path, records: Path):
    records.mkdir(mode=0o700)
    os.chmod(records, 0o777)  # anyone could plant records
    shard = tmp_path / "shard.mds"
    shard.write_bytes(b"z" * 8)
    verified.mark_verified(shard, "sha1")
    assert not verified.is_verified(shard, os.stat(shard), "sha1")
