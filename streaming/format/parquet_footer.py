"""A Parquet file's footer, read into what the planner and the cache need: per row group its rows
and the byte ranges of the projected columns' chunks; and the columns' kinds, checked once.

Pure: bytes in, records out (pyarrow parses the footer's thrift). Layout of a Parquet file's
end: `footer (thrift FileMetaData) | u32 footer length | b"PAR1"`.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streaming.errors import ParquetFileError, ParquetSchemaError, require

MAGIC = b"PAR1"
TAIL = 8  # u32 footer length + magic
_U32 = struct.Struct("<I")


def pyarrow_parquet() -> Any:
    """`pyarrow.parquet`, or MissingExtraError naming the `parquet` extra."""
    return require("pyarrow.parquet", feature="Parquet streams", extra="parquet",
                   package="pyarrow")


def footer_length(tail: bytes, size: int, name: str) -> int:
    """The footer's length from a file's last bytes (`tail`, at least 8); ParquetFileError
    naming `name` when the file is empty, too short, or does not end in a Parquet footer.

    Args:
        tail: the file's last bytes.
        size: the file's size.
        name: the file (for messages).
    """
    if size == 0:
        raise ParquetFileError(f"{name}: the file is empty (0 bytes), not a Parquet file")
    if size < len(MAGIC) + TAIL or len(tail) < TAIL:
        raise ParquetFileError(f"{name}: only {size} bytes, too short for a Parquet file")
    if tail[-4:] != MAGIC:
        raise ParquetFileError(f"{name}: does not end in the Parquet magic bytes PAR1 "
                               "(corrupt or truncated footer, or not a Parquet file)")
    (length,) = _U32.unpack_from(tail, len(tail) - TAIL)
    if length == 0 or length + TAIL + len(MAGIC) > size:
        raise ParquetFileError(f"{name}: footer length {length} does not fit in its "
                               f"{size}-byte file (corrupt footer)")
    return length


def parse_footer(tail: bytes, name: str) -> Any:
    """The FileMetaData of a file whose last `footer length + 8` bytes are `tail`.

    Args:
        tail: the footer, its length and the magic, as the file ends.
        name: the file (for messages).
    """
    pq = pyarrow_parquet()
    try:
        return pq.read_metadata(io.BytesIO(MAGIC + tail))
    except (OSError, ValueError, TypeError) as exc:
        raise ParquetFileError(f"{name}: the footer does not parse (corrupt footer): "
                               f"{exc}") from None


@dataclass(frozen=True)
class RowGroupSpan:
    """One row group as the cache fetches it.

    Args:
        rows: its rows.
        ranges: [start, end) byte ranges of the file holding the projected columns' chunks,
            sorted and merged where they touch.
        decoded: the projected chunks' bytes once decompressed (the footer's
            total_uncompressed_size; dictionary-encoded columns take more once decoded).
    """

    rows: int
    ranges: tuple[tuple[int, int], ...]
    decoded: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes its ranges hold (what a fetch downloads)."""
        return sum(end - start for start, end in self.ranges)


def leaf_count(arrow_type: Any) -> int:
    """Parquet leaf columns one Arrow field of this type is stored in."""
    fields = getattr(arrow_type, "num_fields", 0)
    if not fields:
        return 1
    return sum(leaf_count(arrow_type.field(i).type) for i in range(fields))


def projected_leaves(schema: Any, columns: Sequence[str]) -> list[int]:
    """The leaf column numbers of the top-level `columns` of Arrow `schema`, in file order."""
    wanted = set(columns)
    leaves: list[int] = []
    first = 0
    for field in schema:
        count = leaf_count(field.type)
        if field.name in wanted:
            leaves.extend(range(first, first + count))
        first += count
    return leaves


def row_group_spans(meta: Any, leaves: Sequence[int], name: str) -> list[RowGroupSpan]:
    """Each row group's rows and the byte ranges of leaf columns `leaves`.

    Args:
        meta: the file's FileMetaData.
        leaves: leaf column numbers to fetch (see `projected_leaves`).
        name: the file (for messages).
    """
    return [group_span(meta, g, leaves, name) for g in range(meta.num_row_groups)]


def group_span(meta: Any, g: int, leaves: Sequence[int], name: str) -> RowGroupSpan:
    """Row group `g`'s rows and the byte ranges of leaf columns `leaves` (see
    `row_group_spans`)."""
    group = meta.row_group(g)
    ranges, decoded = [], 0
    for leaf in leaves:
        chunk = group.column(leaf)
        decoded += max(int(chunk.total_uncompressed_size), 0)
        starts = [o for o in (chunk.dictionary_page_offset, chunk.data_page_offset)
                  if o is not None and o > 0]
        if not starts or chunk.total_compressed_size < 0:
            raise ParquetFileError(f"{name}: row group {g} column {chunk.path_in_schema} "
                                   "has no data page offset (corrupt footer)")
        start = min(starts)
        ranges.append((start, start + chunk.total_compressed_size))
    return RowGroupSpan(group.num_rows, merge_ranges(ranges), decoded)


def merge_ranges(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """`ranges` sorted, with touching or overlapping ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def check_ranges(spans: Sequence[RowGroupSpan], data_end: int, name: str) -> None:
    """Refuse a footer whose ranges fall outside the file's data (before the footer).

    Args:
        spans: the file's row groups.
        data_end: where the footer begins.
        name: the file (for messages).
    """
    for g, span in enumerate(spans):
        for start, end in span.ranges:
            if start < len(MAGIC) or end > data_end:
                raise ParquetFileError(f"{name}: row group {g} claims bytes [{start}, {end}), "
                                       f"outside the file's data [4, {data_end}) "
                                       "(corrupt footer or truncated file)")


_NUMERIC = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "halffloat", "float", "double")
_SCALAR = {**{k: k for k in _NUMERIC}, "float16": "halffloat", "float32": "float",
           "float64": "double", "bool": "bool"}


def column_kind(arrow_type: Any) -> str | None:
    """How a column of `arrow_type` is decoded ("int64", "str", "bytes", "ndarray:int32",
    "struct<...>"), or None when it cannot be represented."""
    text = str(arrow_type)
    if text in _SCALAR:
        return _SCALAR[text]
    if text in ("string", "large_string"):
        return "str"
    if text in ("binary", "large_binary"):
        return "bytes"
    value = getattr(arrow_type, "value_type", None)
    if text.startswith(("list<", "large_list<")) and value is not None \
            and str(value) in _SCALAR and str(value) != "bool":
        return f"ndarray:{_SCALAR[str(value)]}"
    if text.startswith("struct<"):
        inner = [column_kind(arrow_type.field(i).type) for i in range(arrow_type.num_fields)]
        return None if None in inner else text
    return None


def column_kinds(schema: Any, columns: Sequence[str] | None, name: str) -> dict[str, str]:
    """`{column: kind}` of the projected columns (all when `columns` is None), in the file's
    order; ParquetSchemaError naming a column that is missing or of a type we cannot represent.

    Args:
        schema: the file's Arrow schema.
        columns: the projection, or None.
        name: the file (for messages).
    """
    fields = {field.name: field.type for field in schema}
    if columns is not None:
        missing = [c for c in columns if c not in fields]
        if missing:
            raise ParquetSchemaError(f"{name}: no column {missing[0]!r}; it has "
                                     f"{sorted(fields)}")
    kinds = {}
    for field_name, arrow_type in fields.items():
        if columns is not None and field_name not in columns:
            continue
        kind = column_kind(arrow_type)
        if kind is None:
            raise ParquetSchemaError(
                f"{name}: column {field_name!r} has type {arrow_type}, which a Parquet stream "
                "cannot represent (scalars, strings, binary, lists of numbers and structs of "
                "those are supported); leave it out with `columns=[...]`")
        kinds[field_name] = kind
    return kinds
