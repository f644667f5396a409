"""Image encodings: `pil` (raw pixels), `jpeg`, `png`, `jpeg_array`, `list[pil|jpeg|png]`.

Pillow is optional (extra `images`) and imported only when an image is encoded or decoded.
Decoded images are independent of the shard's memory (the bytes are copied).
"""

from __future__ import annotations

import struct
from io import BytesIO
from pathlib import Path
from typing import Any

from streaming.errors import ShardCorruptError, require
from streaming.format.encodings.encoding import Encoding


def _pil():
    return require("PIL.Image", feature="image encodings", extra="images", package="Pillow")


def _is_image(value: Any) -> bool:
    module = type(value).__module__
    return module.startswith("PIL.") and isinstance(value, _pil().Image)


def _pack_list(payloads: list[bytes], lead: bytes) -> bytes:
    sizes = struct.pack(f"<{len(payloads)}I", *map(len, payloads))
    return b"".join([lead, struct.pack("<I", len(payloads)), sizes, *payloads])


def _unpack_list(data: memoryview | bytes, offset: int) -> list[memoryview]:
    view = memoryview(data)
    (count,) = struct.unpack_from("<I", view, offset)
    sizes = struct.unpack_from(f"<{count}I", view, offset + 4)
    pos = offset + 4 + 4 * count
    items = []
    for size in sizes:
        items.append(view[pos : pos + size])
        pos += size
    if pos != len(view):
        raise ShardCorruptError(f"image list payloads end at {pos}, value has {len(view)} bytes")
    return items


class PILEncoding(Encoding):
    """`pil`: `[u32 width][u32 height][u32 len(mode)][mode][Image.tobytes()]`, lossless."""

    name = "pil"

    def encode(self, value: Any) -> bytes:
        if not _is_image(value):
            raise self.fail(value, "expected a PIL.Image.Image")
        mode = value.mode.encode("utf-8")
        width, height = value.size
        return struct.pack("<3I", width, height, len(mode)) + mode + value.tobytes()

    def decode(self, data: memoryview | bytes) -> Any:
        width, height, mode_len = struct.unpack_from("<3I", data, 0)
        mode = str(data[12 : 12 + mode_len], "utf-8")
        return _pil().frombytes(mode, (width, height), bytes(data[12 + mode_len :]))


class FileImageEncoding(Encoding):
    """`jpeg` / `png`: the encoded image file; a JPEG opened from disk is stored byte for byte,
    and already encoded file bytes (bytes, bytearray, memoryview) are stored as they are."""

    def __init__(self, name: str, pil_format: str) -> None:
        self.name = name
        self.pil_format = pil_format

    def encode(self, value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if not _is_image(value):
            raise self.fail(value, f"expected a PIL.Image.Image or the {self.name} file's bytes")
        source = getattr(value, "filename", None)
        if value.format == self.pil_format and source and Path(source).is_file():
            return Path(source).read_bytes()
        out = BytesIO()
        try:
            value.save(out, format=self.pil_format)
        except (OSError, ValueError, KeyError) as exc:
            raise self.fail(value, f"Pillow cannot save mode {value.mode} as {self.name}") from exc
        return out.getvalue()

    def decode(self, data: memoryview | bytes) -> Any:
        image = _pil().open(BytesIO(bytes(data)))
        image.load()
        return image


class ImageListEncoding(Encoding):
    """A list of images, each stored with `item`; `lead` is written before the count.

    `jpeg_array` has no lead; `list[...]` encodings start with a u32 zero.
    """

    def __init__(self, name: str, item: Encoding, lead: bytes) -> None:
        self.name = name
        self.item = item
        self.lead = lead

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (list, tuple)):
            raise self.fail(value, "expected a list of PIL images (or of encoded image bytes)")
        return _pack_list([self.item.encode(image) for image in value], self.lead)

    def decode(self, data: memoryview | bytes) -> list[Any]:
        if self.lead and bytes(data[: len(self.lead)]) != self.lead:
            raise ShardCorruptError(f"{self.name} value does not start with {self.lead.hex()}")
        return [self.item.decode(part) for part in _unpack_list(data, len(self.lead))]


def image_encodings() -> dict[str, Encoding]:
    """Every encoding of this family, keyed by name (`jpegarray` is an alias of `jpeg_array`)."""
    pil = PILEncoding()
    jpeg = FileImageEncoding("jpeg", "JPEG")
    png = FileImageEncoding("png", "PNG")
    zero = struct.pack("<I", 0)
    found: dict[str, Encoding] = {"pil": pil, "jpeg": jpeg, "png": png}
    found["jpeg_array"] = ImageListEncoding("jpeg_array", jpeg, b"")
    found["jpegarray"] = ImageListEncoding("jpegarray", jpeg, b"")
    for item in (pil, jpeg, png):
        found[f"list[{item.name}]"] = ImageListEncoding(f"list[{item.name}]", item, zero)
    return found
