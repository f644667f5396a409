"""CSV/TSV input with a header row, split at true record starts despite quoted newlines.

Splitting first tries a vectorised quote-parity scan: a newline ends a record iff an even number
of quote characters precede it, which holds when every quote sits where RFC 4180 allows it. When
the scan finds a quote elsewhere (a literal quote inside an unquoted field), the record starts
are found by parsing instead, so pieces are always whole records.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np

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

BLOCK = 16 << 20
FIELD_LIMIT = 2**31 - 1  # the largest limit every platform's C long accepts
_NEWLINE = ord("\n")


def _line_iter(handle, start: int, stop: int, cursor: Cursor | None) -> Iterator[str]:
    """Decoded lines of a binary file from `start` while they start before `stop`."""
    handle.seek(start)
    pos = start
    for raw in handle:
        if pos >= stop:
            return
        pos += len(raw)
        if cursor is not None:
            cursor.done = pos - start
        yield raw.decode("utf-8")


def _parity_starts(path: Path, begin: int, targets: list[int], quote: int, delim: int
                   ) -> list[int] | None:
    """First record start >= each target by quote parity, or None if quoting is irregular."""
    size = path.stat().st_size
    found: list[int] = []
    pending = [t for t in targets]
    quotes_before = 0
    allowed_before = np.array([delim, _NEWLINE, ord("\r"), quote], dtype=np.uint8)
    with open(path, "rb") as handle:
        pos = begin
        prev = _NEWLINE
        while pending and pos < size:
            handle.seek(pos)
            block = np.frombuffer(handle.read(BLOCK + 1), dtype=np.uint8)
            core = block[:BLOCK]
            after = np.append(block[1:], np.uint8(_NEWLINE))[: len(core)]
            before = np.insert(core[:-1], 0, np.uint8(prev))
            q = np.flatnonzero(core == quote)
            odd = (np.arange(len(q)) + quotes_before) % 2 == 1
            bad_open = ~np.isin(before[q[~odd]], allowed_before)
            bad_close = ~np.isin(after[q[odd]], allowed_before)
            if bad_open.any() or bad_close.any():
                return None
            nl = np.flatnonzero(core == _NEWLINE)
            ends = nl[(np.searchsorted(q, nl) + quotes_before) % 2 == 0] + pos + 1
            while pending:
                i = np.searchsorted(ends, pending[0])
                if i == len(ends):
                    break
                found.append(int(ends[i]))
                pending.pop(0)
            quotes_before += len(q)
            prev = int(core[-1])
            pos += len(core)
    return found + [size] * len(pending)


def _parsed_starts(path: Path, begin: int, targets: list[int], dialect: dict) -> list[int]:
    """First record start >= each target, found by parsing every record (always correct)."""
    size = path.stat().st_size
    found: list[int] = []
    pending = list(targets)
    with open(path, "rb") as handle:
        cursor = Cursor()
        reader = csv.reader(_line_iter(handle, begin, size, cursor), **dialect)
        for _ in reader:
            here = begin + cursor.done
            while pending and here >= pending[0]:
                found.append(here)
                pending.pop(0)
            if not pending:
                break
    return found + [size] * len(pending)


class CsvSource:
    """A delimited text file whose first record names the columns; values stay strings."""

    size_unit = "B"
    text_values = True

    def __init__(self, path: str | Path, *, delimiter: str = ",", quotechar: str = '"') -> None:
        self.path = input_file(path, "CSV")
        self.label = str(self.path)
        self.size = self.path.stat().st_size
        self.dialect = {"delimiter": delimiter, "quotechar": quotechar}
        # The csv module refuses fields over 128 KiB by default; documents are often longer.
        csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))
        self.header, self.data_start = self._read_header()

    def _read_header(self) -> tuple[list[str], int]:
        with open(self.path, "rb") as handle:
            cursor = Cursor()
            reader = csv.reader(_line_iter(handle, 0, self.size, cursor), **self.dialect)
            try:
                header = next(reader)
            except StopIteration:
                raise FormatError(f"{self.path}: empty file, expected a header row") from None
            except (csv.Error, UnicodeDecodeError) as exc:
                raise FormatError(f"{self.path}: unreadable header row: {exc}") from exc
        if len(set(header)) != len(header) or not all(header):
            raise FormatError(f"{self.path}: header names must be unique and non-empty: {header}")
        return header, cursor.done

    def pieces(self, count: int) -> list[Piece]:
        body = self.size - self.data_start
        targets = [self.data_start + b for b in even_bounds(body, count)[1:-1]]
        starts: list[int] = []
        if targets:
            quote, delim = ord(self.dialect["quotechar"]), ord(self.dialect["delimiter"])
            starts = _parity_starts(self.path, self.data_start, targets, quote, delim)
            if starts is None:
                starts = _parsed_starts(self.path, self.data_start, targets, self.dialect)
        return ranges_to_pieces([self.data_start, *starts, self.size], "bytes")

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        header, width = self.header, len(self.header)
        with open(self.path, "rb") as handle:
            lines = _line_iter(handle, piece.start, piece.stop, cursor)
            start = 0  # where the next record begins, relative to the piece
            try:
                for row in csv.reader(lines, **self.dialect):
                    cursor.at, start = piece.start + start, cursor.done
                    if len(row) != width:
                        if not row:
                            continue
                        raise FormatError(
                            f"{self.path}: the record on line {line_of(self.path, cursor.at)} "
                            f"has {len(row)} fields, the header has {width}"
                        )
                    yield dict(zip(header, row))
            except (csv.Error, UnicodeDecodeError) as exc:
                line = line_of(self.path, piece.start + start)
                raise FormatError(f"{self.path}: malformed CSV in the record starting on line "
                                  f"{line}: {exc}") from exc

    def fingerprint(self) -> dict:
        return file_fingerprint(self.path)
