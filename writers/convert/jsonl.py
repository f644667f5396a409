"""JSON Lines input: one object per line, split into byte ranges that start at line starts."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from streaming.errors import FormatError
from writers.convert.position import line_of
from writers.convert.source import (
    Cursor,
    Piece,
    even_bounds,
    file_fingerprint,
    input_file,
    ranges_to_pieces,
)

BLOCK = 8 << 20


# orjson turns integers beyond 64 bits into floats; lines with 20+ digits in a row go to json.
# (A translate + substring test is a fast C pass; a regex backtracks on every number.)
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 20


def _fast_loads():
    """orjson's parser when installed (much faster on token lists), else json's."""
    try:
        import orjson
    except ImportError:
        return json.loads
    fast = orjson.loads

    def loads(line: bytes):
        if _LONG_RUN in line.translate(_DIGITS_TO_ZERO):
            return json.loads(line)
        return fast(line)

    return loads


def line_start_at_or_after(handle, offset: int) -> int:
    """The first line start >= offset in a binary file (the file size if there is none)."""
    if offset <= 0:
        return 0
    handle.seek(offset - 1)
    handle.readline()
    return handle.tell()


def split_lines(path: Path, count: int) -> list[Piece]:
    """Up to `count` byte ranges of near-equal size, each starting at a line start."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        bounds = [line_start_at_or_after(handle, b) for b in even_bounds(size, count)]
    bounds[-1] = size
    return ranges_to_pieces(bounds, "bytes")


def iter_lines(path: Path, start: int, stop: int, cursor: Cursor) -> Iterator[tuple[int, bytes]]:
    """(byte offset, line) for every line starting in [start, stop), without line endings."""
    with open(path, "rb") as handle:
        handle.seek(start)
        pos, tail = start, b""
        while pos < stop:
            block = handle.read(min(BLOCK, stop - pos))
            if not block:
                break
            offset = pos - len(tail)
            pos += len(block)
            lines = (tail + block).split(b"\n")
            tail = lines.pop()
            for line in lines:
                yield offset, line
                offset += len(line) + 1
            cursor.done = pos - start - len(tail)
        if tail:
            yield pos - len(tail), tail
        cursor.done = pos - start


COMPRESSED = (".gz", ".zst", ".zstd")


def _decompressed(path: Path, raw):
    """A binary stream of the decompressed contents of the open compressed file `raw`."""
    if path.suffix.lower() == ".gz":
        import gzip

        return gzip.GzipFile(fileobj=raw)
    import io

    import zstandard

    return io.BufferedReader(
        zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True))


def compressed_lines(path: Path, cursor: Cursor) -> Iterator[tuple[int, bytes]]:
    """(-1, line) for every line of a .gz or .zst file, counting compressed bytes read in
    `cursor.done` and the line number in `cursor.line` (byte offsets mean nothing here)."""
    with open(path, "rb") as raw, _decompressed(path, raw) as stream:
        try:
            for number, line in enumerate(stream, 1):
                cursor.line = number
                cursor.done = raw.tell()
                yield -1, line.rstrip(b"\r\n")
        except (OSError, EOFError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise FormatError(f"{path}: corrupt compressed data after line {max(0, cursor.line)}: "
                              f"{exc}") from exc
    cursor.done = path.stat().st_size


def _numbered(stream, cursor: Cursor) -> Iterator[tuple[int, bytes]]:
    """(-1, line) for the lines of a binary stream, their numbers in `cursor.line`."""
    for number, line in enumerate(stream, 1):
        cursor.line = number
        yield -1, line.rstrip(b"\r\n")


class JsonlSource:
    """A `.jsonl` file of JSON objects (blank lines are skipped), or a `.jsonl.gz` / `.jsonl.zst`
    one (read in one piece: a compressed stream has no line starts to seek to)."""

    size_unit = "B"
    text_values = False

    def __init__(self, path: str | Path) -> None:
        self.path = input_file(path, "JSONL")
        self.label = str(self.path)
        self.size = self.path.stat().st_size
        self.compressed = self.path.suffix.lower() in COMPRESSED

    def pieces(self, count: int) -> list[Piece]:
        if self.compressed:
            return [Piece(0, 0, self.size, "bytes")]
        return split_lines(self.path, count)

    def head(self, limit: int) -> list[dict]:
        """The first `limit` records, reading only as far as they go (column inference)."""
        found: list[dict] = []
        if limit <= 0:
            return found
        with open(self.path, "rb") as raw, contextlib.ExitStack() as stack:
            stream = stack.enter_context(_decompressed(self.path, raw)) if self.compressed else raw
            cursor = Cursor()
            for record in self._parsed(_numbered(stream, cursor), cursor):
                found.append(record)
                if len(found) == limit:
                    break
        return found

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        if self.compressed:
            lines = compressed_lines(self.path, cursor)
        else:
            lines = iter_lines(self.path, piece.start, piece.stop, cursor)
        return self._parsed(lines, cursor)

    def _parsed(self, lines: Iterator[tuple[int, bytes]], cursor: Cursor) -> Iterator[dict]:
        """The JSON objects of (offset, line) pairs; blank lines are skipped."""
        loads = _fast_loads()
        for offset, line in lines:
            if not line.strip():
                continue
            try:
                record = loads(line)
            except ValueError:
                # orjson refuses a few things json accepts (NaN, huge ints): let json decide.
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise FormatError(
                        f"{self.path}: {self._where(offset, cursor, exc)}: invalid JSON: "
                        f"{getattr(exc, 'msg', exc)}") from exc
            if not isinstance(record, dict):
                raise FormatError(
                    f"{self.path}: {self._where(offset, cursor)} is a "
                    f"{type(record).__name__}, expected a JSON object"
                )
            cursor.at = offset
            yield record

    def _where(self, offset: int, cursor: Cursor, exc: ValueError | None = None) -> str:
        """'line N' (and ', column C' from a JSON error) of the line starting at `offset`."""
        number = line_of(self.path, offset) if offset >= 0 else cursor.line
        where = f"line {number}"
        column = getattr(exc, "colno", None)
        return f"{where}, column {column}" if column is not None else where

    def fingerprint(self) -> dict:
        return file_fingerprint(self.path)
