"""Parquet input through pyarrow (extra `parquet`), split by contiguous row groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from streaming.errors import FormatError, require
from writers.convert.source import (
    Cursor,
    Piece,
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
    """One Parquet file; progress and pieces are counted in rows, split at row-group edges."""

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
        self.size = sum(self.group_rows)

    def pieces(self, count: int) -> list[Piece]:
        groups = len(self.group_rows)
        if groups == 0:
            return [Piece(0, 0, 0, "row_groups")]
        # Cut at the row group whose cumulative row count is closest above each even share.
        cumulative, total, bounds = 0, self.size, [0]
        share = max(1, count)
        for i, rows in enumerate(self.group_rows[:-1]):
            cumulative += rows
            if cumulative * share >= total * len(bounds) and len(bounds) < share:
                bounds.append(i + 1)
        bounds.append(groups)
        return ranges_to_pieces(bounds, "row_groups")

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        groups = list(range(piece.start, piece.stop))
        if not groups:
            return
        handle = _pq().ParquetFile(self.path)
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, row_groups=groups):
            yield from batch.to_pylist()
            cursor.done += batch.num_rows

    def fingerprint(self) -> dict:
        return file_fingerprint(self.path)
