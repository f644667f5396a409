"""Image encodings: lossless `pil`, file formats, and the list layouts."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import EncodeError
from streaming.format import get_encoding

Image = pytest.importorskip("PIL.Image")


def image(width: int, height: int, mode: str = "RGB", seed: int = 0):
    bands = len(mode)
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, bands), np.uint8)
    return Image.fromarray(pixels.squeeze(-1) if bands == 1 else pixels, mode)


@given(st.integers(1, 17), st.integers(1, 17), st.sampled_from(["RGB", "L", "RGBA"]))
def test_pil_roundtrip_is_lossless(width, height, mode):
    source = image(width, height, mode)
    data = get_encoding("pil").encode(source)
    assert struct.unpack_from("<3I", data) == (width, height, len(mode))
    got = get_encoding("pil").decode(memoryview(data))
    assert got.mode == mode and got.size == (width, height)
    assert got.tobytes() == source.tobytes()


def test_png_is_lossless_and_jpeg_is_close():
    source = image(12, 7)
    png = get_encoding("png").decode(get_encoding("png").encode(source))
    assert png.tobytes() == source.tobytes()
    jpeg = get_encoding("jpeg").decode(get_encoding("jpeg").encode(Image.new("RGB", (8, 8), "red")))
    assert jpeg.size == (8, 8)
    assert np.abs(np.asarray(jpeg, np.int16) - [255, 0, 0]).max() < 8


def test_jpeg_from_disk_is_stored_byte_for_byte(tmp_path):
    path = tmp_path / "x.jpg"
    image(10, 10).save(path, format="JPEG", quality=93)
    with Image.open(path) as opened:
        assert get_encoding("jpeg").encode(opened) == path.read_bytes()


def test_jpeg_array_layout():
    items = [image(4, 4, seed=1), image(5, 3, seed=2)]
    data = get_encoding("jpeg_array").encode(items)
    count, first, second = struct.unpack_from("<3I", data)
    assert count == 2 and len(data) == 12 + first + second
    got = get_encoding("jpegarray").decode(data)
    assert [im.size for im in got] == [(4, 4), (5, 3)]


@pytest.mark.parametrize("kind", ["pil", "png", "jpeg"])
def test_image_lists_start_with_a_zero_word(kind):
    items = [image(3, 2, seed=3), image(2, 3, seed=4), image(1, 1, seed=5)]
    encoding = get_encoding(f"list[{kind}]")
    data = encoding.encode(items)
    assert struct.unpack_from("<2I", data) == (0, 3)
    got = encoding.decode(data)
    assert [im.size for im in got] == [(3, 2), (2, 3), (1, 1)]
    if kind != "jpeg":
        assert [im.tobytes() for im in got] == [im.tobytes() for im in items]
    assert encoding.decode(encoding.encode([])) == []


@pytest.mark.parametrize("name", ["pil", "jpeg", "png", "jpeg_array", "list[pil]"])
def test_non_images_are_refused(name):
    with pytest.raises(EncodeError, match="PIL"):
        get_encoding(name).encode("not an image" if "[" not in name else ["x"])


@pytest.mark.parametrize("name", ["pil", "list[pil]"])
def test_raw_pixels_refuse_bytes(name):
    """Only the file encodings take already encoded bytes (docs/writing.md)."""
    with pytest.raises(EncodeError, match="PIL"):
        get_encoding(name).encode(b"not an image" if "[" not in name else [b"x"])


def test_jpeg_refuses_modes_it_cannot_store():
    with pytest.raises(EncodeError, match="jpeg"):
        get_encoding("jpeg").encode(image(4, 4, "RGBA"))
