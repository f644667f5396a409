"""Compression codecs: name parsing, round trips, streaming decompression, corrupt input."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import DecompressionError
from streaming.format import compress, decompress, decompress_file, extension, parse_compression
from streaming.format.index import read_index

CODECS = ["zstd", "zstd:1", "zstd:22", "gz", "gz:0", "bz2:1", "br", "br:0", "snappy"]


@pytest.mark.parametrize(
    ("name", "parsed"),
    [(None, None), ("zstd", ("zstd", 3)), ("zstd:7", ("zstd", 7)), ("gz", ("gz", 9)),
     ("gz:0", ("gz", 0)), ("bz2", ("bz2", 9)), ("br", ("br", 11)), ("br:0", ("br", 0)),
     ("snappy", ("snappy", None))],
)
def test_parse_compression(name, parsed):
    assert parse_compression(name) == parsed


@pytest.mark.parametrize(
    "name", ["lz4", "zstd:0", "zstd:23", "gz:10", "bz2:0", "br:12", "snappy:1", "zstd:", "zstd:x",
             "zstd:+3", "ZSTD", "", 7],
)
def test_bad_compression_names(name):
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        parse_compression(name)


def test_extension():
    assert [extension(n) for n in ("zstd:7", "gz", "bz2", "br:3", "snappy")] == [
        "zstd", "gz", "bz2", "br", "snappy"]


@pytest.mark.parametrize("name", CODECS)
@given(st.binary(max_size=2048))
def test_roundtrip(name, data):
    assert decompress(name, memoryview(compress(name, data))) == data


def test_gzip_output_is_deterministic():
    assert compress("gz", b"abc" * 100) == compress("gz", b"abc" * 100)


def test_large_zstd_uses_threads_and_roundtrips():
    data = os.urandom(1 << 20) * 9
    assert decompress("zstd", compress("zstd:1", data)) == data


@pytest.mark.parametrize("name", ["zstd", "gz", "bz2", "br", "snappy"])
def test_corrupt_data_names_the_source(name):
    good = compress(name, bytes(range(256)) * 64)
    for bad in (good[: len(good) // 2], b"\x00garbage" + good[8:]):
        with pytest.raises(DecompressionError, match=r"shard\.7\.mds"):
            decompress(name, bad, source="/x/shard.7.mds")


@pytest.mark.parametrize("name", ["zstd:3", "gz", "bz2", "br", "snappy"])
def test_decompress_file_streams_and_is_atomic(tmp_path, name):
    data = os.urandom(3000) * 2000
    src = tmp_path / f"s.mds.{extension(name)}"
    src.write_bytes(compress(name, data))
    dst = tmp_path / "s.mds"
    assert decompress_file(src, dst, name) == dst
    assert dst.read_bytes() == data
    src.write_bytes(src.read_bytes()[:-20])
    dst.unlink()
    with pytest.raises(DecompressionError, match=r"s\.mds\."):
        decompress_file(src, dst, name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]  # no partial output


def test_decompress_file_trailing_garbage_zstd(tmp_path):
    src = tmp_path / "a.zstd"
    src.write_bytes(compress("zstd", b"hello") + b"extra")
    with pytest.raises(DecompressionError, match="trailing"):
        decompress_file(src, tmp_path / "a", "zstd")


def test_reference_files_decompress_to_recorded_sizes(reference_fixtures, tmp_path):
    for name in ("llm_zstd", "llm_zstd7", "llm_gz", "llm_bz2", "llm_br", "llm_snappy"):
        index = read_index(reference_fixtures / name)
        src = index.zip_path(0)
        assert len(decompress(index.compression[0], src.read_bytes())) == index.raw_bytes[0]
        dst = decompress_file(src, tmp_path / f"{name}.mds", index.compression[0])
        assert dst.stat().st_size == index.raw_bytes[0]


@pytest.mark.parametrize("name", ["zstd", "zstd:7", "gz", "bz2"])
def test_decompress_file_with_expected_size(tmp_path, name):
    data = os.urandom(5000) * 400
    src = tmp_path / f"s.mds.{extension(name)}"
    src.write_bytes(compress(name, data))
    dst = tmp_path / "s.mds"
    assert decompress_file(src, dst, name, expected_size=len(data)).read_bytes() == data
    dst.unlink()
    with pytest.raises(DecompressionError, match="index says"):
        decompress_file(src, dst, name, expected_size=len(data) + 1)
    src.write_bytes(src.read_bytes()[:-20])  # truncated
    with pytest.raises(DecompressionError, match=r"s\.mds\."):
        decompress_file(src, dst, name, expected_size=len(data))
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]  # no partial output


def test_decompress_file_with_expected_size_refuses_trailing_zstd_data(tmp_path):
    src = tmp_path / "a.zstd"
    src.write_bytes(compress("zstd", b"hello") + b"extra")
    with pytest.raises(DecompressionError, match=r"a\.zstd"):
        decompress_file(src, tmp_path / "a", "zstd", expected_size=5)
    assert not (tmp_path / "a").exists()
