"""Decompressing a large zstd shard into the cache on two threads: one decodes while the
calling thread writes what it decoded, so writing the raw file adds almost nothing to the
time the shard takes to land (a first batch waits for exactly that)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import BinaryIO

import zstandard

from streaming.errors import DecompressionError
from streaming.format.compression import ZSTD_READ, past_limit
from streaming.util.atomic import atomic_output
from streaming.util.pagewrite import write_sliced

PIECE = 1 << 20  # decoded bytes handed from the decoding thread to the writing one
PIECES_AHEAD = 4  # decoded pieces waiting to be written, at most
DECODE_TIMEOUT = 300.0  # seconds without a decoded piece before giving up (a stuck read)


def unpack_zstd(src: Path, dst: Path, expected_size: int) -> Path:
    """Decompress the zstd file `src` (one frame or several) into `dst`, which appears
    atomically or not at all, without fsync (a cache can decompress again).

    Args:
        src: the compressed shard.
        dst: the raw shard to write.
        expected_size: the raw bytes the index gives; another size is a DecompressionError.
    """
    pieces: queue.Queue[bytes | BaseException | None] = queue.Queue(PIECES_AHEAD)
    done = threading.Event()
    decoder = threading.Thread(target=_decode, args=(src, pieces, done), daemon=True,
                               name="streaming-unpack")
    decoder.start()
    try:
        with atomic_output(dst, durable=False) as out:
            written = _write_pieces(src, pieces, out, expected_size)
            if written != expected_size:
                raise DecompressionError(
                    f"{src}: decompressed to {written} bytes, the index says {expected_size}")
    finally:
        done.set()
        decoder.join(DECODE_TIMEOUT)
    return dst


def _write_pieces(src: Path, pieces: queue.Queue[bytes | BaseException | None],
                  out: BinaryIO, limit: int) -> int:
    """Write the decoded pieces to `out` until the decoder ends; a piece that would take the
    file past `limit` bytes (the index's raw size) is refused, unwritten."""
    written = 0
    while True:
        try:
            piece = pieces.get(timeout=DECODE_TIMEOUT)
        except queue.Empty:
            raise DecompressionError(
                f"{src}: nothing decoded for {DECODE_TIMEOUT:g} s (a read that never returns)"
            ) from None
        if piece is None:
            return written
        if isinstance(piece, zstandard.ZstdError):
            raise DecompressionError(f"corrupt zstd data in {src}: {piece}") from piece
        if isinstance(piece, BaseException):
            raise piece
        if written + len(piece) > limit:
            raise DecompressionError(f"{src}: {past_limit(written + len(piece), limit)}")
        written += write_sliced(out, piece)


def _decode(src: Path, pieces: queue.Queue[bytes | BaseException | None],
            done: threading.Event) -> None:
    """The decoding thread: pieces of `src`'s raw bytes, then None (or the error met)."""
    try:
        with open(src, "rb") as handle:
            reader = zstandard.ZstdDecompressor().stream_reader(
                handle, read_size=ZSTD_READ, read_across_frames=True)
            while piece := reader.read(PIECE):
                if not _hand(pieces, piece, done):
                    return
        _hand(pieces, None, done)
    except BaseException as exc:  # the writing thread raises it
        _hand(pieces, exc, done)


def _hand(pieces: queue.Queue[bytes | BaseException | None], item: bytes | BaseException | None,
          done: threading.Event) -> bool:
    """Queue `item` for the writer; False once the writer has stopped taking pieces."""
    while not done.is_set():
        try:
            pieces.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False
