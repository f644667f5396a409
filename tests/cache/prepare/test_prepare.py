"""ShardPreparer: different shards prepare in parallel, one shard once; zstd shards decompress
to the right bytes, and corrupt or truncated ones raise errors naming the file."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streaming.errors import DecompressionError, HashMismatchError
from streaming.format.compression import decompress_file
from streaming.stream import Stream
from tests.cache.helpers import open_dataset
from tests.support.datasets import write_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    write_dataset(src, 400, size_limit=16_000)
    return src


def _slow_fetches(monkeypatch, pause: float) -> dict[str, int]:
    """Make every fetch take `pause` s; count fetches and the most running at once."""
    seen = {"now": 0, "most": 0, "calls": 0}
    lock = threading.Lock()
    fetch = Stream.fetch

    def slow(self, *args, **kwargs):
        with lock:
            seen["now"] += 1
            seen["calls"] += 1
            seen["most"] = max(seen["most"], seen["now"])
        try:
            time.sleep(pause)
            return fetch(self, *args, **kwargs)
        finally:
            with lock:
                seen["now"] -= 1

    monkeypatch.setattr(Stream, "fetch", slow)
    return seen


def test_different_shards_prepare_in_parallel_and_one_shard_once(source, tmp_path, monkeypatch):
    handle = open_dataset(str(source), str(tmp_path / "cache"))
    seen = _slow_fetches(monkeypatch, 0.3)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(handle.preparer.prepare, [0, 1, 2, 3]))
    assert seen["most"] >= 3  # serialised, this would be 1
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(handle.preparer.prepare, [5, 5, 5, 5]))
    assert seen["calls"] == 5 and len(set(paths)) == 1
    for shard in (0, 1, 2, 3, 5):
        expected = tmp_path / "want"
        decompress_file(source / handle.facts.zip_basenames[shard], expected, "zstd")
        assert handle.preparer.raw_path(shard).read_bytes() == expected.read_bytes()


def test_forget_makes_prepare_look_at_the_disk_again(source, tmp_path):
    handle = open_dataset(str(source), str(tmp_path / "cache"))
    raw = handle.preparer.prepare(0)
    raw.unlink()
    assert handle.preparer.prepare(0) == raw and not raw.exists()  # memo: still "ready"
    handle.preparer.forget(0)
    assert handle.preparer.prepare(0).exists()


@pytest.mark.parametrize("damage", ["corrupt", "truncate"])
def test_damaged_zstd_shard_raises_an_error_naming_it(source, tmp_path, damage):
    remote = tmp_path / "remote"
    remote.mkdir()
    for path in source.iterdir():
        (remote / path.name).write_bytes(path.read_bytes())
    handle = open_dataset(str(remote), str(tmp_path / "cache"))
    name = handle.facts.zip_basenames[1]
    body = bytearray((remote / name).read_bytes())
    if damage == "corrupt":
        body[len(body) // 2:len(body) // 2 + 64] = bytes(64)
    else:
        body = body[:len(body) // 2]
    (remote / name).write_bytes(bytes(body))
    # The index records the zip size: keep it so the fetch itself passes; the digest the index
    # records (checked in place, as a download would be) or decompression then fails.
    handle.facts.zip_bytes[1] = len(body)
    with pytest.raises((DecompressionError, HashMismatchError), match=name):
        handle.preparer.prepare(1)
    assert not handle.preparer.raw_path(1).exists()


@pytest.mark.parametrize("keep_zip", [False, True])
def test_a_filesystem_remote_is_decompressed_in_place_unless_keep_zip(source, tmp_path,
                                                                      monkeypatch, keep_zip):
    handle = open_dataset(f"file://{source}", str(tmp_path / "cache"), keep_zip=keep_zip,
                          validate_hash="xxh64")
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    raw = handle.preparer.prepare(2)
    monkeypatch.setattr(os, "fsync", real_fsync)
    want = tmp_path / "want"
    decompress_file(source / handle.facts.zip_basenames[2], want, "zstd")
    assert raw.read_bytes() == want.read_bytes()
    zipped = raw.parent / handle.facts.zip_basenames[2]
    assert zipped.exists() == keep_zip  # no copy of the compressed file unless asked to keep it
    assert fsyncs == []  # cache files can be rebuilt: published by rename, not fsynced


def test_an_overridden_fetch_sees_every_transfer(source, tmp_path, monkeypatch):
    seen = _slow_fetches(monkeypatch, 0.0)
    handle = open_dataset(str(source), str(tmp_path / "cache"))
    handle.preparer.prepare(0)
    assert seen["calls"] == 1


def test_raw_paths_stay_right_once_the_kept_paths_are_dropped(source, tmp_path, monkeypatch):
    """The preparer keeps at most RAW_PATHS joined paths; past that it starts afresh, and every
    path it gives is still the shard's own file."""
    from streaming.cache.prepare import preparer as prepare

    monkeypatch.setattr(prepare, "RAW_PATHS", 3)
    handle = open_dataset(str(source), str(tmp_path / "cache"))
    preparer, shards = handle.preparer, len(handle.facts.basenames)
    assert shards > 3
    for _ in range(2):
        for shard in range(shards):
            path = preparer.raw_path(shard)
            assert path == preparer.root(shard) / handle.facts.basenames[shard]
            assert len(preparer._raw_paths) <= 3
