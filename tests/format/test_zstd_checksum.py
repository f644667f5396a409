"""zstd shards carry the frame's content checksum: a flipped byte that still decodes (an
incompressible block is stored as is) is caught by the checksum instead of read back silently."""

from __future__ import annotations

import json
import os

import pytest
import zstandard

from streaming.errors import DecompressionError
from streaming.format.compression import ZstdStream, compress, decompress
from writers.mds import MDSWriter


def _flip_inside_a_stored_block(frame: bytes) -> bytes:
    body = bytearray(frame)
    body[len(body) // 2] ^= 0x5A
    return bytes(body)


def test_compressed_frames_carry_a_checksum_that_catches_a_flipped_byte():
    data = os.urandom(200_000)  # incompressible: zstd stores the bytes raw
    frame = compress("zstd", data)
    assert zstandard.get_frame_parameters(frame).has_checksum
    assert decompress("zstd", frame) == data
    bad = _flip_inside_a_stored_block(frame)
    with pytest.raises(DecompressionError, match="checksum"):
        decompress("zstd", bad, source="shard.00000.mds.zstd")
    stream = ZstdStream()
    with pytest.raises(DecompressionError, match="checksum"):
        stream.feed(bad)
        stream.finish()


def test_the_writer_writes_checksummed_frames_and_an_xxh64_digest_by_default(tmp_path):
    with MDSWriter(columns={"blob": "bytes"}, out=tmp_path, compression="zstd") as writer:
        for _ in range(4):
            writer.write({"blob": os.urandom(5000)})
    index = json.loads((tmp_path / "index.json").read_text())
    shard = index["shards"][0]
    assert set(shard["raw_data"]["hashes"]) == set(shard["zip_data"]["hashes"]) == {"xxh64"}
    frame = (tmp_path / shard["zip_data"]["basename"]).read_bytes()
    assert zstandard.get_frame_parameters(frame).has_checksum
