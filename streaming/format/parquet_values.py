"""A decoded Parquet row group's columns, as a stream's samples hold them: scalars as Python
values, strings as str, binary as bytes, lists of numbers as numpy arrays (views of one array of
the column's values, no Python object per element), structs as dicts, nulls as None."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from streaming.format.value_length import value_length


class Column(Protocol):
    """One decoded column of a row group."""

    def take(self, rows: np.ndarray, views: bool = False) -> list[Any]:
        """The values of `rows` (positions in the row group); with `views`, binary values
        as read-only memoryviews of the decoded column instead of new bytes."""


@dataclass(frozen=True)
class ListColumn:
    """A list<number> column: row r is `values[offsets[r]:offsets[r + 1]]`, or None where
    `valid` is False.

    Args:
        values: every row's numbers, one array.
        offsets: int64 start of each row in `values`, and the end.
        valid: False where a row is null (None: no nulls).
    """

    values: np.ndarray
    offsets: np.ndarray
    valid: np.ndarray | None

    def take(self, rows: np.ndarray, views: bool = False) -> list[Any]:
        values, offsets = self.values, self.offsets
        out: list[Any] = [values[a:b] for a, b in zip(offsets[rows].tolist(),
                                                      offsets[rows + 1].tolist())]
        if self.valid is not None:
            for k in np.flatnonzero(~self.valid[rows]).tolist():
                out[k] = None
        return out


@dataclass(frozen=True)
class ValueColumn:
    """A column of Python values (numbers, str, bytes, dicts or None), one per row."""

    values: list[Any]

    def take(self, rows: np.ndarray, views: bool = False) -> list[Any]:
        values = self.values
        return [values[r] for r in rows.tolist()]


@dataclass(frozen=True)
class BytesColumn:
    """A binary or string column kept as its Arrow buffers: a read makes the bytes (or str)
    objects of the rows it takes, and no others (a shuffled batch touching many row groups
    pays for its own rows, not for every row of each group).

    Args:
        data: the column's bytes, every row's back to back (uint8, a view of Arrow's buffer).
        offsets: int64 start of each row in `data`, and the end.
        valid: False where a row is null (None: no nulls).
        text: whether rows are UTF-8 text (str) rather than bytes.
    """

    data: np.ndarray
    offsets: np.ndarray
    valid: np.ndarray | None
    text: bool

    def take(self, rows: np.ndarray, views: bool = False) -> list[Any]:
        data = memoryview(self.data)
        starts, ends = self.offsets[rows].tolist(), self.offsets[rows + 1].tolist()
        if self.text:
            out: list[Any] = [str(data[a:b], "utf-8") for a, b in zip(starts, ends)]
        elif views:
            out = [data[a:b] for a, b in zip(starts, ends)]
        else:
            out = [data[a:b].tobytes() for a, b in zip(starts, ends)]
        if self.valid is not None:
            for k in np.flatnonzero(~self.valid[rows]).tolist():
                out[k] = None
        return out


@dataclass(frozen=True)
class StructColumn:
    """A struct column, kept as its Arrow array: each read builds new dicts (a caller that
    changes one changes no later read of the same row).

    Args:
        array: the column's values (a pyarrow StructArray).
    """

    array: Any

    def take(self, rows: np.ndarray, views: bool = False) -> list[Any]:
        return self.array.take(rows).to_pylist()


@dataclass(frozen=True)
class NumberColumn:
    """A scalar column without nulls, kept as one numpy array."""

    values: np.ndarray

    def take(self, rows: np.ndarray, views: bool = False) -> list[Any]:
        return self.values[rows].tolist()


def decode_column(array: Any, kind: str) -> Column:
    """One column of a decoded row group (a pyarrow Array of one chunk) as `kind` says.

    Args:
        array: the column's values.
        kind: its kind (see `streaming.format.parquet_footer.column_kind`).
    """
    if kind.startswith("ndarray:"):
        offsets = np.asarray(array.offsets.to_numpy(), np.int64)
        values = array.values.to_numpy(zero_copy_only=False)
        valid = None
        if array.null_count:
            valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)
        return ListColumn(values, offsets, valid)
    if kind.startswith("struct<"):
        return StructColumn(array)
    if kind in ("str", "bytes") and str(array.type) in _OFFSET_WIDTH:
        return _bytes_column(array, kind == "str")
    if kind in ("str", "bytes") or array.null_count:
        return ValueColumn(array.to_pylist())
    return NumberColumn(array.to_numpy(zero_copy_only=False))


_OFFSET_WIDTH = {"binary": np.int32, "string": np.int32, "large_binary": np.int64,
                 "large_string": np.int64}  # Arrow types of offsets and one data buffer


def _bytes_column(array: Any, text: bool) -> BytesColumn:
    """A binary or string Arrow array's buffers as a BytesColumn (no copy of the data)."""
    _, offsets_buffer, data_buffer = array.buffers()
    if offsets_buffer is None:  # an empty array
        return BytesColumn(np.zeros(0, np.uint8), np.zeros(1, np.int64), None, text)
    offsets = np.frombuffer(offsets_buffer, _OFFSET_WIDTH[str(array.type)])
    offsets = offsets[array.offset:array.offset + len(array) + 1].astype(np.int64)
    data = (np.frombuffer(data_buffer, np.uint8) if data_buffer is not None
            else np.zeros(0, np.uint8))
    data.flags.writeable = False  # views handed out must not change later reads
    valid = None
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)
    return BytesColumn(data, offsets, valid, text)


def sample_dicts(names: Sequence[str], columns: Sequence[Column], rows: np.ndarray
                 ) -> list[dict[str, Any]]:
    """One dict per row of `rows`, its columns' values under their names."""
    taken = [column.take(rows) for column in columns]
    return [dict(zip(names, values)) for values in zip(*taken)]


def column_lengths(column: Column) -> np.ndarray:
    """int64 length of every row's value: elements of a list, bytes of str/binary, an
    integer's value (0 for a null)."""
    if isinstance(column, (ListColumn, BytesColumn)):
        lengths = np.diff(column.offsets)
        return lengths if column.valid is None else np.where(column.valid, lengths, 0)
    if isinstance(column, NumberColumn):
        return column.values.astype(np.int64)
    if isinstance(column, StructColumn):
        return np.array([0 if v is None else value_length(v)
                         for v in column.array.to_pylist()], np.int64)
    return np.array([0 if v is None else value_length(v) for v in column.values], np.int64)
