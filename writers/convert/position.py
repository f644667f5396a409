"""Where a record came from, in the words a user can act on: the line of a text file, or the
row of a table or iterable (1-based), for error messages only (never on the hot path)."""

from __future__ import annotations

from pathlib import Path

from writers.convert.source import Cursor, Piece, Source

_BLOCK = 8 << 20


def line_of(path: Path, offset: int) -> int:
    """The 1-based line number of byte `offset` in `path` (newlines before it, plus one)."""
    count, done = 0, 0
    with open(path, "rb") as handle:
        while done < offset:
            block = handle.read(min(_BLOCK, offset - done))
            if not block:
                break
            count += block.count(b"\n")
            done += len(block)
    return count + 1


def record_position(source: Source, piece: Piece, cursor: Cursor, index: int) -> str:
    """'line N' for a text source that marked the record's byte offset in `cursor.at`, else
    'row N' (the record's place in the whole input) for row-addressed sources; `index` is the
    record's place in its piece (0-based)."""
    path = getattr(source, "path", None)
    if cursor.at >= 0 and isinstance(path, Path):
        return f"line {line_of(path, cursor.at)}"
    first = piece.start
    if piece.unit == "row_groups":
        first = sum(getattr(source, "group_rows", [])[:piece.start])
    elif piece.unit == "bytes":
        return f"record {index + 1} of the byte range starting at {piece.start}"
    return f"row {max(first, 0) + index + 1}"
