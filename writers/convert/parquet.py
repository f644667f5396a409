"""Parquet input through pyarrow (extra `parquet`), split into contiguous row ranges."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator
from pathlib import Path

from streaming.errors import FormatError, require
from writers.convert.source import (
    Cursor,
    Piece,
    even_bounds,
    file_fingerprint,
    input_file,
    ranges_to_pieces,
)

BATCH_ROWS = 8192


def _pq():
    return require("pyarrow.parquet", feature="Parquet conversion", extra="parquet",
                   package="pyarrow")


def _arrow_encoding(pa, kind) -> str | None:
    types = pa.types
    if types.is_boolean(kind):
        return "json"
    if types.is_integer(kind):
        return "int" if kind == pa.int64() else str(kind.to_pandas_dtype().__name__)
    if types.is_floating(kind):
        return str(kind.to_pandas_dtype().__name__)
    if types.is_string(kind) or types.is_large_string(kind):
        return "str"
    if types.is_binary(kind) or types.is_large_binary(kind):
        return "bytes"
    if types.is_list(kind) or types.is_large_list(kind):
        inner = _arrow_encoding(pa, kind.value_type)
        if inner in (None, "json", "str", "bytes"):
            return "json"
        if inner.startswith("ndarray:"):  # nested lists: one array of more dimensions
            return inner
        return "ndarray:" + ("int64" if inner == "int" else inner)
    if types.is_struct(kind) or types.is_map(kind):
        return "json"
    return None


def columns_from_arrow(schema) -> dict[str, str]:
    """Encodings implied by an Arrow schema (types without an obvious encoding are left out)."""
    pa = require("pyarrow", feature="Arrow schema inference", extra="parquet")
    found = {field.name: _arrow_encoding(pa, field.type) for field in schema}
    return {name: enc for name, enc in found.items() if enc is not None}


class ParquetSource:
    """One Parquet file; progress and pieces are counted in rows. Pieces end at row-group edges
    where one lies near an even share, and inside a row group where none does (a file written
    as one row group still splits over workers; each worker then decodes the whole group and
    keeps its rows)."""

    size_unit = "rows"
    text_values = False

    def __init__(self, path: str | Path) -> None:
        self.path = input_file(path, "Parquet")
        self.label = str(self.path)
        try:
            meta = _pq().ParquetFile(self.path).metadata
        except (OSError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise FormatError(f"{self.path}: not a readable Parquet file: {exc}") from exc
        self.schema_columns = columns_from_arrow(meta.schema.to_arrow_schema())
        self.group_rows = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        self.group_starts = list(itertools.accumulate(self.group_rows, initial=0))
        self.size = sum(self.group_rows)

    def pieces(self, count: int) -> list[Piece]:
        bounds = even_bounds(self.size, count)
        share = self.size / max(1, len(bounds) - 1)
        edges = self.group_starts
        for i in range(1, len(bounds) - 1):
            at = bisect.bisect_left(edges, bounds[i])
            near = min(edges[max(0, at - 1):at + 1], key=lambda e: abs(e - bounds[i]))
            if abs(near - bounds[i]) <= share / 4:
                bounds[i] = near
        return ranges_to_pieces(sorted(set(bounds)), "rows")

    def group_of(self, row: int) -> int:
        """The row group holding row `row` (0-based)."""
        return max(0, bisect.bisect_right(self.group_starts, row) - 1)

    def _rows(self, piece: Piece) -> tuple[int, int]:
        if piece.unit == "row_groups":  # plans written before pieces were counted in rows
            return self.group_starts[piece.start], self.group_starts[piece.stop]
        return piece.start, piece.stop

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        start, stop = self._rows(piece)
        if stop <= start:
            return
        handle = _pq().ParquetFile(self.path)
        for group in range(self.group_of(start), len(self.group_rows)):
            first = self.group_starts[group]
            if first >= stop:
                break
            row = first
            for batch in self._batches(handle, group):
                base = row
                row += batch.num_rows
                lo, hi = max(start, base) - base, min(stop, row) - base
                if hi <= lo:
                    continue
                for k, record in enumerate(batch.slice(lo, hi - lo).to_pylist()):
                    cursor.row = base + lo + k
                    yield record
                cursor.done = min(stop, row) - start
                if row >= stop:
                    return

    def _batches(self, handle, group: int) -> Iterator:
        """The record batches of one row group; FormatError naming the file and the group."""
        try:
            yield from handle.iter_batches(batch_size=BATCH_ROWS, row_groups=[group])
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise FormatError(f"{self.path}: row group {group}: unreadable: {exc}") from exc

    def fingerprint(self) -> dict:
        return file_fingerprint(self.path)
