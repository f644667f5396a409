"""ShardReader validates headers eagerly and names the file; corrupt shards never crash Python."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

from streaming.errors import HashMismatchError, IndexFileError, ShardCorruptError
from streaming.format import SampleCodec, ShardReader, read_index, validate_file

CODEC = SampleCodec.from_columns({"id": "int", "text": "str"})


def write_shard(path, samples, codec=CODEC):
    """A raw shard laid out like the reference writer's (config JSON between table and data)."""
    import json

    config = json.dumps({
        "column_encodings": codec.column_encodings, "column_names": codec.column_names,
        "column_sizes": codec.column_sizes, "compression": None, "format": "mds", "hashes": [],
        "size_limit": 1 << 26, "version": 2,
    }, sort_keys=True).encode()
    payloads = [codec.encode(s) for s in samples]
    start = 4 + 4 * (len(payloads) + 1) + len(config)
    offsets = np.cumsum([start] + [len(p) for p in payloads]).astype("<u4")
    path.write_bytes(
        struct.pack("<I", len(payloads)) + offsets.tobytes() + config + b"".join(payloads)
    )
    return path


@pytest.fixture
def shard_file(tmp_path):
    samples = [{"id": i, "text": "x" * i} for i in range(5)]
    return write_shard(tmp_path / "shard.00000.mds", samples)


def test_reads_own_shard(shard_file):
    with ShardReader(shard_file, CODEC, expected_samples=5) as shard:
        assert len(shard) == 5
        assert shard[3] == {"id": 3, "text": "xxx"}
        assert shard[-1]["id"] == 4
        assert bytes(shard.sample_bytes(0)) == CODEC.encode({"id": 0, "text": ""})
        assert shard.sample_sizes.tolist() == [8 + 4 + i for i in range(5)]
        assert shard.config["format"] == "mds"
        with pytest.raises(IndexError, match=r"shard\.00000\.mds"):
            shard.get(5)


def test_codec_from_embedded_config(shard_file):
    with ShardReader(shard_file) as shard:
        assert shard.codec == CODEC and shard[2]["text"] == "xx"


def test_pickles_by_path_and_reopens_lazily(shard_file):
    shard = ShardReader(shard_file, CODEC)
    clone = pickle.loads(pickle.dumps(shard))
    assert clone._mmap is None and len(clone) == 5
    assert clone[4] == shard[4]
    clone.close()
    shard.close()
    assert shard[1]["id"] == 1  # reopens after close


def test_views_survive_close(reference_fixtures):
    index = read_index(reference_fixtures / "llm_raw")
    shard = ShardReader(index.raw_path(0), index.codec())
    tokens = shard[0]["tokens"]
    expected = tokens.copy()
    shard.close()
    assert np.array_equal(tokens, expected)


def _corrupt(path, change):
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.__delitem__(slice(len(d) - 3, None)), "truncated"),
        (lambda d: d.extend(b"junk"), "trailing"),
        (lambda d: d.__delitem__(slice(10, None)), "offset table"),
        (lambda d: d.__delitem__(slice(2, None)), "at least"),
        (lambda d: d.clear(), "0 bytes"),
        (lambda d: d.__setitem__(slice(0, 4), struct.pack("<I", 10**6)), "offset table"),
        (lambda d: d.__setitem__(slice(24, 28), struct.pack("<I", 10**6)), "past|last offset"),
        (lambda d: d.__setitem__(slice(12, 16), struct.pack("<I", 1)), "decrease"),
        (lambda d: d.__setitem__(slice(4, 8), struct.pack("<I", 3)), "first sample offset"),
        (lambda d: d.__setitem__(slice(28, 30), b"[["), "config"),
    ],
)
def test_corrupt_headers_raise_naming_the_file(shard_file, change, message):
    _corrupt(shard_file, change)
    with pytest.raises(ShardCorruptError, match=message) as info:
        ShardReader(shard_file, CODEC)
    assert str(shard_file) in str(info.value)


def test_expectations_from_the_index(shard_file):
    with pytest.raises(ShardCorruptError, match="index says 6"):
        ShardReader(shard_file, CODEC, expected_samples=6)
    with pytest.raises(ShardCorruptError, match="index says 7"):
        ShardReader(shard_file, CODEC, expected_bytes=7)
    other = SampleCodec.from_columns({"id": "int", "text": "bytes"})
    with pytest.raises(ShardCorruptError, match="differ"):
        ShardReader(shard_file, other)


def test_corrupt_sample_payload_raises_on_get(tmp_path):
    path = write_shard(tmp_path / "s.mds", [{"id": 1, "text": "héllo"}])
    _corrupt(path, lambda d: d.__setitem__(-4, 0xFF))  # break the UTF-8
    with ShardReader(path, CODEC) as shard, pytest.raises(ShardCorruptError, match="sample 0"):
        shard.get(0)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        ShardReader(tmp_path / "nope.mds")


def test_validate_file(shard_file):
    from streaming.format import file_hexdigest

    digest = file_hexdigest("sha256", shard_file)
    size = shard_file.stat().st_size
    validate_file(shard_file, size, {"sha256": digest}, ["sha256"])
    validate_file(shard_file, None, {}, [])
    with pytest.raises(ShardCorruptError, match="bytes"):
        validate_file(shard_file, size + 1, {}, [])
    with pytest.raises(HashMismatchError, match=r"shard\.00000\.mds: sha256"):
        validate_file(shard_file, size, {"sha256": "0" * 64}, ["sha256"])
    with pytest.raises(IndexFileError, match="no md5"):
        validate_file(shard_file, size, {"sha256": digest}, ["md5"])
    with pytest.raises(ShardCorruptError, match="missing"):
        validate_file(shard_file.with_name("gone.mds"), size, {}, [])


def test_hash_mismatch_on_tampered_reference_shard(reference_fixtures, tmp_path):
    index = read_index(reference_fixtures / "llm_hashed")
    copy = tmp_path / "shard.mds.zstd"
    data = bytearray(index.zip_path(0).read_bytes())
    data[100] ^= 1
    copy.write_bytes(bytes(data))
    zipped = index.shards[0]["zip_data"]
    with pytest.raises(HashMismatchError, match="xxh64"):
        validate_file(copy, zipped["bytes"], zipped["hashes"], ["xxh64"])


def test_a_layout_reads_by_position_without_the_reader(shard_file):
    """ShardLayout keeps what positional reads need after the reader closed; a file that changed
    size since it was validated is refused by name rather than read."""
    import os

    with ShardReader(shard_file, CODEC, expected_samples=5) as shard:
        layout = shard.layout()
        expected = [bytes(shard.sample_bytes(i)) for i in range(5)]
    assert layout.codec == CODEC and layout.size == shard_file.stat().st_size
    starts, ends = layout.spans(np.array([4, 0, 2]))
    fd = layout.open()
    try:
        got = [os.pread(fd, int(b - a), int(a)) for a, b in zip(starts, ends)]
    finally:
        os.close(fd)
    assert got == [expected[4], expected[0], expected[2]]
    with pytest.raises(IndexError, match=r"shard\.00000\.mds: sample 5 out of range"):
        layout.spans(np.array([1, 5]))
    with pytest.raises(IndexError, match="sample -1"):
        layout.spans(np.array([-1]))
    with open(shard_file, "ab") as handle:
        handle.write(b"x")
    with pytest.raises(ShardCorruptError, match=r"shard\.00000\.mds: file has \d+ bytes, it had"):
        layout.open()
