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


def describe(source: Source, name: str, cursor: Cursor) -> str | None:
    """'NAME: line N' or 'NAME: row N (row group G)' for the record `cursor` last saw in the
    one-file `source`, when the cursor knows its line, offset or row (else None)."""
    path = getattr(source, "path", None)
    if cursor.line >= 0:
        return f"{name}: line {cursor.line}"
    if cursor.at >= 0 and isinstance(path, Path):
        return f"{name}: line {line_of(path, cursor.at)}"
    if cursor.row >= 0:
        group = getattr(source, "group_of", None)
        extra = f" (row group {group(cursor.row)})" if group is not None else ""
        return f"{name}: row {cursor.row + 1}{extra}"
    return None


def record_position(source: Source, piece: Piece, cursor: Cursor, index: int) -> str:
    """'FILE: line N' for a text source that marked the record's line or byte offset in
    `cursor`, else 'FILE: row N' (the record's place in the whole input, 1-based) for
    row-addressed sources, with the row group for Parquet; `index` is the record's place in its
    piece (0-based). An input of several files names the file the record came from."""
    where = getattr(source, "where", None)
    if where is not None:
        return where(cursor)
    label = source.label
    found = describe(source, label, cursor)
    if found is not None:
        return found
    first = piece.start
    if piece.unit == "row_groups":
        first = sum(getattr(source, "group_rows", [])[:piece.start])
    elif piece.unit == "bytes":
        return f"{label}: record {index + 1} of the byte range starting at {piece.start}"
    return f"{label}: row {max(first, 0) + index + 1}"
