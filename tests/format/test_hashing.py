"""Hash algorithms accepted in index.json, and streamed file digests."""

from __future__ import annotations

import hashlib

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from streaming.format import SUPPORTED_HASHES, file_hexdigest, hexdigest, is_supported_hash
from streaming.format.hashing import file_hexdigests


def test_supported_set():
    for algo in ("md5", "sha1", "sha256", "sha3_512", "blake2b", "xxh32", "xxh64", "xxh3_64",
                 "xxh3_128", "xxh128"):
        assert is_supported_hash(algo) and algo in SUPPORTED_HASHES
    for algo in ("shake_128", "shake_256", "crc32", "SHA1"):
        assert not is_supported_hash(algo)


@given(st.binary(max_size=4096))
def test_digests_match_the_libraries(data):
    assert hexdigest("sha1", data) == hashlib.sha1(data).hexdigest()
    assert hexdigest("xxh3_64", memoryview(data)) == xxhash.xxh3_64(data).hexdigest()
    assert hexdigest("xxh128", data) == hexdigest("xxh3_128", data)


def test_file_digest_streams_across_chunks(tmp_path, monkeypatch):
    import streaming.format.hashing as hashing

    monkeypatch.setattr(hashing, "_CHUNK", 1000)
    data = bytes(range(256)) * 17
    path = tmp_path / "f"
    path.write_bytes(data)
    assert file_hexdigest("md5", path) == hashlib.md5(data).hexdigest()
    both = file_hexdigests(["sha256", "xxh64"], path)
    assert both == {"sha256": hashlib.sha256(data).hexdigest(),
                    "xxh64": xxhash.xxh64(data).hexdigest()}


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="'crc32'"):
        hexdigest("crc32", b"")
    with pytest.raises(ValueError, match="shake_128"):
        hexdigest("shake_128", b"")
