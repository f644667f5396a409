"""Local paths and file:// URLs through the Backend interface, the registry and join()."""

from __future__ import annotations

import os
import pickle
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import (
    ArgumentError,
    DownloadTimeoutError,
    HashMismatchError,
    ObjectNotFoundError,
    StorageError,
)
from streaming.format.hashing import hexdigest
from streaming.storage import backend_for, fetch, join, upload
from streaming.storage.local_folder import LocalBackend


def test_plain_path_and_file_url_resolve_to_the_same_file(tmp_path):
    target = tmp_path / "a b" / "x.bin"
    target.parent.mkdir()
    target.write_bytes(b"hello")
    backend, path = backend_for(target)
    assert isinstance(backend, LocalBackend) and path == str(target)
    backend2, path2 = backend_for("file://" + str(target).replace(" ", "%20"))
    assert backend2 == backend and path2 == path
    assert backend.get(path) == b"hello"


def test_relative_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert backend_for("sub/x")[1] == str(tmp_path / "sub" / "x")


def test_unknown_scheme_and_remote_file_host_are_refused():
    with pytest.raises(StorageError, match=r"ftp://host/x.*unsupported URL scheme 'ftp'"):
        backend_for("ftp://host/x")
    with pytest.raises(StorageError, match="file URLs must name a local path"):
        backend_for("file://otherhost/x")
    with pytest.raises(StorageError, match="needs a bucket"):
        backend_for("s3:///key")


def test_put_get_size_exists_list_delete(tmp_path):
    backend = LocalBackend()
    root = tmp_path / "data"
    for name in ("a/1.mds", "a/2.mds", "ab/3.mds", "b/4.mds"):
        backend.put(str(root / name), name.encode())
    assert backend.get(str(root / "a/2.mds")) == b"a/2.mds"
    assert backend.size(str(root / "ab/3.mds")) == len(b"ab/3.mds")
    assert backend.exists(str(root / "b/4.mds")) and not backend.exists(str(root / "b/5.mds"))
    assert not backend.exists(str(root / "b"))  # a folder is not an object
    names = ("a/1.mds", "a/2.mds", "ab/3.mds")
    assert backend.list(str(root / "a")) == [str(root / n) for n in names]
    assert backend.list(str(root / "a") + os.sep) == [str(root / n) for n in names[:2]]
    assert backend.list(str(tmp_path / "nothing-here")) == []
    backend.delete(str(root / "a/1.mds"))
    backend.delete(str(root / "a/1.mds"))  # deleting twice is fine, like S3
    assert not backend.exists(str(root / "a/1.mds"))
    assert [p for p in os.listdir(root / "a") if p.startswith(".")] == []  # no temp files left


def test_missing_file_errors_name_the_path(tmp_path):
    backend = LocalBackend()
    missing = str(tmp_path / "missing.mds")
    for call in (lambda: backend.get(missing), lambda: backend.size(missing)):
        with pytest.raises(ObjectNotFoundError, match=r"missing\.mds: No such file or directory"):
            call()
    with pytest.raises(ObjectNotFoundError, match="is a directory"):
        backend.size(str(tmp_path))
    with pytest.raises(ObjectNotFoundError, match="No such file or directory"):
        backend.upload(tmp_path / "nope", str(tmp_path / "dest"))


@given(data=st.binary(max_size=3000), a=st.integers(0, 3500), b=st.integers(0, 3500))
def test_get_range_is_slicing(fresh_dir, data, a, b):
    path = fresh_dir() / "blob"
    path.write_bytes(data)
    start, end = min(a, b), max(a, b)
    backend = LocalBackend()
    if end <= len(data) or start == end:
        assert backend.get_range(str(path), start, end) == data[start:end]
    else:
        with pytest.raises(StorageError, match="truncated"):
            backend.get_range(str(path), start, end)


def test_get_range_rejects_reversed_ranges_and_reads_open_ended_ones(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert LocalBackend().get_range(str(tmp_path / "f"), 1, None) == b"bc"
    with pytest.raises(ValueError, match="bad byte range"):
        LocalBackend().get_range(str(tmp_path / "f"), 2, 1)


def test_fetch_local_verifies_size_and_hashes(tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(3 << 20)
    src.write_bytes(data)
    good = {"sha1": hexdigest("sha1", data), "xxh64": hexdigest("xxh64", data)}
    out = fetch(str(src), tmp_path / "out" / "a.bin", expected_size=len(data), expected_hashes=good)
    assert out.read_bytes() == data
    with pytest.raises(StorageError, match=r"sent more than 5 bytes .* stopped after 1,048,576"):
        fetch(str(src), tmp_path / "out" / "b.bin", expected_size=5, retry=0)
    with pytest.raises(HashMismatchError, match=r"c.bin \(from .*src.bin\): sha1 digest"):
        fetch(f"file://{src}", tmp_path / "out" / "c.bin", expected_hashes={"sha1": "0" * 40})
    assert sorted(os.listdir(tmp_path / "out")) == ["a.bin"]  # failures leave nothing behind


def test_download_past_its_deadline_times_out_and_leaves_nothing(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * (3 << 20))
    with pytest.raises(DownloadTimeoutError, match=r"src\.bin: transfer exceeded its deadline"):
        LocalBackend().download(str(src), tmp_path / "o" / "d", deadline=time.monotonic() - 1)
    assert os.listdir(tmp_path / "o") == []


def test_upload_copies_atomically(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    upload(src, str(tmp_path / "remote" / "dst.bin"))
    assert (tmp_path / "remote" / "dst.bin").read_bytes() == b"payload"


def test_backends_pickle(tmp_path):
    backend, _ = backend_for(tmp_path)
    assert pickle.loads(pickle.dumps(backend)) == backend


@pytest.mark.parametrize(
    ("root", "parts", "expected"),
    [
        ("s3://bucket", ("a", "b.mds"), "s3://bucket/a/b.mds"),
        ("s3://bucket/pre/", ("/split/", "index.json"), "s3://bucket/pre/split/index.json"),
        ("/data/x", ("", "y"), "/data/x/y"),
        ("/data/x/", ("/abs",), "/data/x/abs"),
        ("file:///data", (), "file:///data"),
    ],
)
def test_join(root, parts, expected):
    assert join(root, *parts) == expected


@given(st.lists(st.text(alphabet="ab/.", min_size=1, max_size=5), max_size=4))
def test_join_keeps_the_root_and_the_parts_in_order(parts):
    kept = [p.strip("/") for p in parts if p.strip("/")]
    assert join("s3://bkt/root", *parts) == "/".join(["s3://bkt/root", *kept])


def test_a_store_without_conditional_reads_refuses_an_if_match(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"hello")
    backend, path = backend_for(tmp_path / "x.bin")
    assert not backend.conditional_reads
    assert backend.list_versions(str(tmp_path) + "/")[path].etag is None
    with pytest.raises(ArgumentError, match="reads cannot be conditional"):
        backend.get_range(path, 0, 2, if_match='"abc"')
