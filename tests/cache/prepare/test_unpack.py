"""A large zstd shard decoded on one thread and written on another
(streaming.cache.prepare.zstd_unpack): the same bytes as a plain decompression whatever the
framing, a clear error for bad input, and nothing left behind (no file, no thread) whichever side
fails."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import zstandard

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.prepare import preparer as prepare
from streaming.cache.prepare import zstd_unpack as unpack
from streaming.errors import DecompressionError
from tests.cache.helpers import engine_source, open_dataset, read_in_order

RAW = np.random.default_rng(0).integers(0, 8, 3 * unpack.PIECE + 12345, np.uint8).tobytes()


def _packed(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "shard.mds.zstd"
    path.write_bytes(data)
    return path


def _no_decoder_left() -> bool:
    return not any(t.name == "streaming-unpack" and t.is_alive() for t in threading.enumerate())


def test_one_frame_or_several_decode_to_the_raw_bytes(tmp_path):
    one = zstandard.ZstdCompressor().compress(RAW)
    half = len(RAW) // 2
    several = (zstandard.ZstdCompressor().compress(RAW[:half])
               + zstandard.ZstdCompressor().compress(RAW[half:]))
    for name, data in (("one", one), ("several", several)):
        dst = tmp_path / f"{name}.mds"
        assert unpack.unpack_zstd(_packed(tmp_path, data), dst, len(RAW)) == dst
        assert dst.read_bytes() == RAW, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.mds", "several.mds",
                                                          "shard.mds.zstd"]
    assert _no_decoder_left()


@pytest.mark.parametrize("damage, match", [
    (lambda d: d[:len(d) // 2] + bytes(64) + d[len(d) // 2 + 64:], "corrupt zstd data"),
    (lambda d: d + b"trailing", "corrupt zstd data"),
    (lambda d: d[:-1000], "decompressed to"),
])
def test_bad_input_is_a_decompression_error_and_leaves_no_file(tmp_path, damage, match):
    src = _packed(tmp_path, damage(zstandard.ZstdCompressor().compress(RAW)))
    with pytest.raises(DecompressionError, match=match) as info:
        unpack.unpack_zstd(src, tmp_path / "out.mds", len(RAW))
    assert str(src) in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["shard.mds.zstd"]
    assert _no_decoder_left()


def test_a_write_that_fails_stops_the_decoder_and_leaves_no_file(tmp_path, monkeypatch):
    src = _packed(tmp_path, zstandard.ZstdCompressor().compress(RAW))
    calls = []

    def full_disk(handle, data):
        calls.append(len(data))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(unpack, "write_sliced", full_disk)
    with pytest.raises(OSError, match="No space left"):
        unpack.unpack_zstd(src, tmp_path / "out.mds", len(RAW))
    assert calls == [unpack.PIECE]
    assert [p.name for p in tmp_path.iterdir()] == ["shard.mds.zstd"]
    assert _no_decoder_left()


def test_a_cache_filled_through_the_two_threads_reads_every_sample(tmp_path_factory,
                                                                   monkeypatch):
    """Every zstd shard of a dataset prepared by `unpack_zstd` (its size threshold lowered):
    each sample read back through the cache is the one written."""
    source = engine_source(tmp_path_factory, 300)
    used = []
    real = unpack.unpack_zstd

    def counted(src, dst, size):
        used.append(Path(src).name)
        return real(src, dst, size)

    monkeypatch.setattr(prepare, "UNPACK_FROM", 0)
    monkeypatch.setattr(prepare, "unpack_zstd", counted)
    handle = open_dataset(str(source), str(tmp_path_factory.mktemp("cache")))
    engine = CacheEngine(handle.preparer, cache_limit=None)
    assert read_in_order(handle, engine, np.arange(300)) == 300
    assert sorted(used) == sorted(handle.facts.zip_basenames)
    engine.close()


def test_a_decoder_that_never_delivers_is_an_error_after_the_deadline(tmp_path, monkeypatch):
    """A read that never returns (a hung file system) is a DecompressionError naming the file
    once `DECODE_TIMEOUT` passes without a decoded piece, not a wait without end."""
    src = _packed(tmp_path, zstandard.ZstdCompressor().compress(RAW))

    def stuck(src, pieces, done):
        done.wait(30)  # hands nothing until the writer gives up

    monkeypatch.setattr(unpack, "DECODE_TIMEOUT", 0.2)
    monkeypatch.setattr(unpack, "_decode", stuck)
    with pytest.raises(DecompressionError, match=r"nothing decoded for 0\.2 s") as info:
        unpack.unpack_zstd(src, tmp_path / "out.mds", len(RAW))
    assert str(src) in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["shard.mds.zstd"]
    assert _no_decoder_left()
