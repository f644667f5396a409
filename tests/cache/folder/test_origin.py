"""The origin record of a cache folder, unit by unit: which files a changed index invalidates
(shards and their sample-lengths side files), refusal of another remote, folders filled by other
tools, the offline fallback, and the temp files a killed sync leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.cache.folder.file_names import NODE_FILE, NODE_LOCK, ORIGIN_FILE
from streaming.cache.folder.origin import changed_files, file_entries, sync_index
from streaming.errors import CacheOriginError, ObjectNotFoundError
from streaming.format.index import parse_index


def _index(shards: list[tuple[str, int, str]], lengths: bool = False) -> bytes:
    """index.json text for (basename, bytes, xxh64) shards of 10 samples each."""
    entries = [{"raw_data": {"basename": name, "bytes": size, "hashes": {"xxh64": digest}},
                "zip_data": None, "samples": 10, "format": "mds", "version": 2,
                "column_names": ["id"], "column_encodings": ["int"], "column_sizes": [8],
                "compression": None, "hashes": ["xxh64"], "size_limit": 1 << 20}
               for name, size, digest in shards]
    document: dict = {"version": 2, "shards": entries}
    if lengths:
        document["sample_lengths"] = {"dtype": "<u4", "files": [
            {"basename": f"{name}.lengths", "bytes": 40} for name, _, _ in shards]}
    return json.dumps(document).encode()


def _fetcher(text: bytes):
    def fetch(dest: Path) -> None:
        dest.write_bytes(text)
    return fetch


def test_changed_entries_name_the_shard_and_its_lengths_file() -> None:
    old = _index([("a.mds", 48, "1"), ("b.mds", 48, "2")], lengths=True)
    new = _index([("a.mds", 48, "1"), ("b.mds", 48, "3")], lengths=True)
    entries = [file_entries(parse_index(text, source="index.json")) for text in (old, new)]
    assert sorted(changed_files(*entries)) == [
        "b.mds", "b.mds.lengths"]


def test_sync_drops_changed_files_and_refuses_another_remote(tmp_path: Path) -> None:
    local = tmp_path / "cache"
    first = _index([("a.mds", 48, "1"), ("0/b.mds", 48, "2")])
    sync_index(local, "s3://bucket/x/", _fetcher(first))
    (local / "0").mkdir()
    for name in ("a.mds", "0/b.mds"):
        (local / name).write_bytes(b"old")
    assert json.loads((local / ORIGIN_FILE).read_text())["remote"] == "s3://bucket/x"
    sync_index(local, "s3://bucket/x", _fetcher(_index([("a.mds", 48, "1"), ("0/b.mds", 48, "9")])))
    assert (local / "a.mds").exists() and not (local / "0/b.mds").exists()
    with pytest.raises(CacheOriginError, match=r"s3://bucket/x\b.*s3://bucket/y"):
        sync_index(local, "s3://bucket/y", _fetcher(first))
    assert (local / "a.mds").exists()


def test_a_folder_without_record_keeps_only_what_its_own_index_describes(tmp_path: Path) -> None:
    local = tmp_path / "cache"
    local.mkdir()
    (local / "index.json").write_bytes(_index([("a.mds", 48, "1"), ("b.mds", 48, "2")]))
    for name in ("a.mds", "b.mds", "c.mds"):
        (local / name).write_bytes(b"old")
    new = _index([("a.mds", 48, "1"), ("b.mds", 48, "5"), ("c.mds", 48, "6")])
    sync_index(local, "/remote", _fetcher(new))
    assert sorted(p.name for p in local.glob("*.mds")) == ["a.mds"]


def test_offline_uses_only_a_complete_copy_of_the_same_remote(tmp_path: Path) -> None:
    local = tmp_path / "cache"
    # 48 bytes: the smallest raw shard of 10 samples an index may describe (header + offsets)
    sync_index(local, "/remote", _fetcher(_index([("a.mds", 48, "1")])))

    def unreachable(dest: Path) -> None:
        raise ObjectNotFoundError("/remote/index.json: no such file")

    with pytest.raises(ObjectNotFoundError):
        sync_index(local, "/remote", unreachable)  # a.mds is not there
    (local / "a.mds").write_bytes(b"x" * 48)
    assert sync_index(local, "/remote", unreachable) == local / "index.json"
    with pytest.raises(ObjectNotFoundError):
        sync_index(local, "/elsewhere", unreachable)


def test_a_killed_sync_leaves_nothing_after_the_next_one(tmp_path: Path) -> None:
    local = tmp_path / "cache"
    local.mkdir()
    leftovers = [local / ".index.json.123.ab12.tmp", local / "..index.json.1.a.tmp.2.b.tmp",
                 local / f".{ORIGIN_FILE}.9.tmp", local / ".streaming-origin.lock"]
    for path in leftovers:
        path.write_bytes(b"x")
    sync_index(local, "/remote", _fetcher(_index([("a.mds", 48, "1")])))
    assert not any(path.exists() for path in leftovers)
    assert sorted(p.name for p in local.iterdir()) == sorted(
        [NODE_FILE, NODE_LOCK, ORIGIN_FILE, "index.json"])


def test_a_folder_whose_own_index_is_not_an_index_drops_what_the_new_one_names(
        tmp_path: Path) -> None:
    """Its names are not trusted (nothing it names is removed), and every file the new index
    names counts as changed, as in a fresh folder."""
    local = tmp_path / "cache"
    local.mkdir()
    (local / "index.json").write_bytes(b"not json")
    for name in ("a.mds", "keep.txt"):
        (local / name).write_bytes(b"old")
    sync_index(local, "/remote", _fetcher(_index([("a.mds", 48, "1")])))
    assert sorted(p.name for p in local.iterdir() if not p.name.startswith(".")) == [
        "index.json", "keep.txt"]


@pytest.mark.parametrize("first,second", [
    ("{p}", "file://{p}"), ("file://{p}/", "{p}"), ("{p}", "file://localhost{p}"),
    ("{p}/../{name}", "{p}"),
])
def test_a_path_and_its_file_url_are_one_remote(tmp_path: Path, first: str, second: str) -> None:
    remote = tmp_path / "data"
    local = tmp_path / "cache"
    text = _index([("a.mds", 48, "1")])
    sync_index(local, first.format(p=remote, name=remote.name), _fetcher(text))
    (local / "a.mds").write_bytes(b"x" * 48)
    sync_index(local, second.format(p=remote, name=remote.name), _fetcher(text))
    assert (local / "a.mds").exists()


def test_a_file_url_and_a_stream_read_one_cache_folder(tmp_path: Path) -> None:
    from streaming.dataset.streaming_dataset import StreamingDataset
    from tests.support.datasets import write_dataset

    remote, local = tmp_path / "data", tmp_path / "cache"
    write_dataset(remote, 20, compression=None)
    for url in (str(remote), f"file://{remote}"):
        ids = [int(s["id"]) for s in StreamingDataset(remote=url, local=str(local),
                                                      shuffle=False, batch_size=1)]
        assert sorted(ids) == list(range(20))
