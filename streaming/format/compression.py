"""Whole-shard compression codecs of MDS v2: zstd, gz, bz2, br (brotli), snappy (raw block).

A codec string is `name` or `name:level` as written in index.json. The compressed file is the
raw file's name plus `.<extension>`.
"""

from __future__ import annotations

import bz2
import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import zstandard

from streaming.errors import DecompressionError, FormatError, require
from streaming.util.atomic import atomic_output
from streaming.util.pagewrite import WRITE_SLICE, write_sliced

# codec -> (default level, lowest level, highest level); None levels: the codec takes no level.
_LEVELS: dict[str, tuple[int, int, int] | None] = {
    "zstd": (3, 1, 22),
    "gz": (9, 0, 9),
    "bz2": (9, 1, 9),
    "br": (11, 0, 11),
    "snappy": None,
}
_CHUNK = 1 << 22
_ZSTD_THREADS_FROM = 8 << 20  # below this, thread start-up costs more than it saves


def parse_compression(name: str | None) -> tuple[str, int | None] | None:
    """Split `zstd:7` into `("zstd", 7)`; None stays None; unknown or bad levels -> ValueError."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise FormatError(f"compression must be a string like 'zstd:7' or None, got {name!r}")
    codec, sep, level_text = name.partition(":")
    if codec not in _LEVELS:
        raise FormatError(
            f"Invalid compression: {name}. unknown compression {name!r}; supported: "
            f"{', '.join(sorted(_LEVELS))} (optionally with ':level')"
        )
    levels = _LEVELS[codec]
    if not sep:
        return codec, None if levels is None else levels[0]
    if levels is None:
        raise FormatError(f"compression {name!r}: {codec} takes no level")
    try:
        level = int(level_text)
    except ValueError:
        raise FormatError(f"compression {name!r}: level {level_text!r} is not an integer") from None
    if not levels[1] <= level <= levels[2] or level_text.strip() != str(level):
        raise FormatError(f"compression {name!r}: {codec} levels are {levels[1]}..{levels[2]}")
    return codec, level


def _parse(name: str) -> tuple[str, int | None]:
    parsed = parse_compression(name)
    if parsed is None:
        raise FormatError("compression name is None: nothing to (de)compress")
    return parsed


def extension(name: str) -> str:
    """File extension (without dot) of the compressed file: `zstd:7` -> `zstd`."""
    return _parse(name)[0]


def _brotli():
    return require("brotli", feature="brotli compression", extra="brotli", package="brotli")


def _snappy():
    return require("snappy", feature="snappy compression", extra="snappy", package="python-snappy")


def compress(name: str, data: bytes | memoryview) -> bytes:
    """Compress a whole shard with codec `name` (deterministic: no timestamps in gzip)."""
    codec, level = _parse(name)
    if codec == "zstd":
        threads = -1 if len(data) >= _ZSTD_THREADS_FROM else 0
        return zstandard.ZstdCompressor(level=level, threads=threads,
                                        write_checksum=True).compress(data)
    if codec == "gz":
        return gzip.compress(data, compresslevel=level, mtime=0)
    if codec == "bz2":
        return bz2.compress(data, compresslevel=level)
    if codec == "br":
        return _brotli().compress(bytes(data), quality=level)
    return _snappy().compress(bytes(data))


def _where(source: str | os.PathLike | None) -> str:
    return f" in {os.fspath(source)}" if source is not None else ""


def decompress(
    name: str, data: bytes | memoryview, *, source: str | os.PathLike | None = None
) -> bytes:
    """Decompress a whole shard; corrupt input -> DecompressionError naming `source` if given."""
    codec, _ = _parse(name)
    try:
        if codec == "zstd":
            return _zstd_decompress(data)
        if codec == "gz":
            return gzip.decompress(data)
        if codec == "bz2":
            return bz2.decompress(data)
        if codec == "br":
            return _brotli().decompress(bytes(data))
        return _snappy().decompress(bytes(data))
    except DecompressionError as exc:
        raise DecompressionError(f"{exc}{_where(source)}") from exc
    except (MemoryError, ImportError):
        raise
    except Exception as exc:  # each codec library has its own error types
        raise DecompressionError(
            f"corrupt {codec} data{_where(source)}: {type(exc).__name__}: {exc}"
        ) from exc


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    chunks = _zstd_chunks(iter([data]))
    return b"".join(chunks)


def _zstd_chunks(pieces: Iterator[bytes | memoryview]) -> Iterator[bytes]:
    decoder = ZstdStream()
    for piece in pieces:
        out = decoder.feed(piece)
        if out:
            yield out
    decoder.finish()


STEP_UNKNOWN = 512  # input bytes per decoding call of a frame without its size (<= 16 MiB out)


def past_limit(produced: int, limit: int) -> DecompressionError:
    """The error for a shard that inflates past the raw size its index declares."""
    return DecompressionError(
        f"decompresses to more than the {limit:,} bytes the index declares (stopped after "
        f"{produced:,}): a decompression bomb or a wrong index; nothing past the declared "
        "size is written")


def _zstd_step(head: bytes, limit: int) -> int:
    """Input bytes per decoding call for a frame starting with `head`: whole pieces when the
    frame records a content size within `limit` (libzstd then refuses any block that would
    exceed it), small steps when it records none."""
    try:
        declared = zstandard.get_frame_parameters(head).content_size
    except zstandard.ZstdError:
        return STEP_UNKNOWN  # too short to tell, or corrupt: decoding names the fault
    if declared == zstandard.CONTENTSIZE_UNKNOWN:
        return STEP_UNKNOWN
    if declared > limit:
        raise DecompressionError(
            f"the zstd frame declares {declared:,} bytes, more than the {limit:,} bytes the "
            "index declares: refused before decoding")
    return 1 << 30


class ZstdStream:
    """Incremental decoding of one zstd frame fed in pieces as they arrive (a download in
    flight), so no compressed copy has to be written and read back.

    A decompressobj works whether or not the frame header records the content size; the
    explicit end-of-frame check in `finish` catches truncation, which zstandard would
    otherwise ignore. Corrupt input raises DecompressionError.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._dobj = zstandard.ZstdDecompressor().decompressobj()
        self.limit = limit
        self.produced = 0
        self._step: int | None = None  # input bytes per decoding call; None: not yet known

    def feed(self, piece: bytes | memoryview) -> bytes:
        """The bytes `piece` completes (often none for small pieces). With a `limit`, output
        past it is a DecompressionError raised before more than one bounded step is held:
        a frame whose header records a larger content size is refused outright, and a frame
        without one is decoded in input steps small enough that no step can inflate by more
        than a few MiB (zstd's largest ratio is about 32,000 to 1)."""
        if self._dobj.eof:
            if len(piece):
                raise DecompressionError("trailing bytes after the end of the zstd frame")
            return b""
        if self.limit is None:
            return self._decode(piece)
        if self._step is None:
            self._step = _zstd_step(bytes(piece[:18]), self.limit)
        if len(piece) <= self._step:
            return self._checked(self._decode(piece))
        view = memoryview(piece)
        return b"".join([self._checked(self._decode(view[at:at + self._step]))
                         for at in range(0, len(view), self._step)])

    def _decode(self, piece: bytes | memoryview) -> bytes:
        try:
            return self._dobj.decompress(piece)
        except zstandard.ZstdError as exc:
            raise DecompressionError(f"corrupt zstd data: {exc}") from exc

    def _checked(self, out: bytes) -> bytes:
        self.produced += len(out)
        if self.limit is not None and self.produced > self.limit:
            raise past_limit(self.produced, self.limit)
        return out

    def finish(self) -> None:
        """Raise unless exactly one whole frame was fed."""
        if not self._dobj.eof:
            raise DecompressionError("truncated zstd data (the frame never ends)")
        if self._dobj.unused_data:
            raise DecompressionError("trailing bytes after the end of the zstd frame")


def _read_chunks(handle) -> Iterator[bytes]:
    while chunk := handle.read(_CHUNK):
        yield chunk


def _brotli_chunks(pieces: Iterator[bytes]) -> Iterator[bytes]:
    decompressor = _brotli().Decompressor()
    for piece in pieces:
        out = decompressor.process(piece)
        if out:
            yield out
    if not decompressor.is_finished():
        raise DecompressionError("truncated brotli data (the stream never ends)")


def _decompressed_chunks(codec: str, src: Path) -> Iterator[bytes]:
    if codec in ("gz", "bz2"):
        opener = gzip.open if codec == "gz" else bz2.open
        with opener(src, "rb") as handle:
            yield from _read_chunks(handle)
        return
    with open(src, "rb") as handle:
        if codec == "zstd":
            yield from _zstd_chunks(_read_chunks(handle))
        elif codec == "br":
            yield from _brotli_chunks(_read_chunks(handle))
        else:  # snappy's raw block format cannot be streamed
            yield _snappy().decompress(handle.read())


def _checked_chunks(codec: str, src: Path) -> Iterator[bytes]:
    """Decompressed chunks of `src`; any decoding failure becomes a DecompressionError."""
    chunks = _decompressed_chunks(codec, src)
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except (FileNotFoundError, PermissionError, MemoryError, ImportError):
            raise
        except DecompressionError as exc:
            raise DecompressionError(f"{exc} in {src}") from exc
        except Exception as exc:  # each codec library has its own error types
            raise DecompressionError(
                f"corrupt {codec} data in {src}: {type(exc).__name__}: {exc}"
            ) from exc
        yield chunk


ZSTD_READ = 1 << 20  # bytes per read of the zstd file-to-file path (writes: WRITE_SLICE)


def decompress_file(src: str | os.PathLike, dst: str | os.PathLike, name: str, *,
                    expected_size: int | None = None, durable: bool = True) -> Path:
    """Decompress `src` into `dst` in bounded memory; `dst` appears atomically or not at all.

    With `expected_size` (the index's raw bytes) a result of another size is a
    DecompressionError, and zstd streams file to file inside libzstd (GIL released, about twice
    the chunked path); the size check then stands in for the chunked path's end-of-frame check.
    `durable=False` skips fsync (see `atomic_output`): for caches that can decompress again.
    """
    codec, _ = _parse(name)
    src, dst = Path(src), Path(dst)
    with atomic_output(dst, durable=durable) as out:
        if codec == "zstd" and expected_size is not None:
            capped = CappedWriter(out, expected_size, src)
            _, written = _zstd_copy(src, capped)  # libzstd rejects trailing bytes itself
        else:
            written = 0
            for chunk in _checked_chunks(codec, src):
                if expected_size is not None and written + len(chunk) > expected_size:
                    raise DecompressionError(
                        f"{src}: {past_limit(written + len(chunk), expected_size)}")
                written += write_sliced(out, chunk)
        if expected_size is not None and written != expected_size:
            raise DecompressionError(
                f"{src}: decompressed to {written} bytes, the index says {expected_size}")
    return dst


class CappedWriter:
    """A file-like sink that passes writes on to `out` until they would exceed `limit`
    bytes, and then raises DecompressionError instead, having written at most `limit`.

    Args:
        out: the file written.
        limit: the most bytes written (the raw size the index declares).
        src: the compressed file, for the message.
    """

    def __init__(self, out: BinaryIO, limit: int, src: Path) -> None:
        self.out, self.limit, self.src, self.written = out, limit, src, 0

    def write(self, data: bytes) -> int:
        """Write `data`, or refuse it when it would pass the limit.

        Args:
            data: decoded bytes.
        """
        if self.written + len(data) > self.limit:
            over = past_limit(self.written + len(data), self.limit)
            raise DecompressionError(f"{self.src}: {over}")
        self.written += write_sliced(self.out, data)
        return len(data)


def _zstd_copy(src: Path, out: BinaryIO | CappedWriter) -> tuple[int, int]:
    try:
        with open(src, "rb") as handle:
            return zstandard.ZstdDecompressor().copy_stream(
                handle, out, read_size=ZSTD_READ, write_size=WRITE_SLICE)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"corrupt zstd data in {src}: {exc}") from exc
