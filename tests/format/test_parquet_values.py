"""A decoded Parquet row group's binary and string columns: kept as Arrow's buffers, each read
making the bytes or str of the rows it takes (nulls, wide offsets, sliced arrays, empty)."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from streaming.format.parquet_values import (  # noqa: E402
    BytesColumn,
    ValueColumn,
    column_lengths,
    decode_column,
)

VALUES = {"bytes": [b"a", b"", None, b"\x00\xff" * 3, b"last"],
          "str": ["a", "", None, "héllo ✓", "last"]}
TYPES = {"bytes": (pa.binary(), pa.large_binary()), "str": (pa.string(), pa.large_string())}


@pytest.mark.parametrize("kind", ["bytes", "str"])
@pytest.mark.parametrize("wide", [False, True])
def test_rows_are_made_from_the_buffers_as_they_are_taken(kind: str, wide: bool) -> None:
    array = pa.array(VALUES[kind], TYPES[kind][wide])
    column = decode_column(array, kind)
    assert isinstance(column, BytesColumn)
    assert np.shares_memory(column.data, np.frombuffer(array.buffers()[2], np.uint8))
    rows = np.array([4, 2, 0, 3, 1, 3])
    assert column.take(rows) == [VALUES[kind][r] for r in rows.tolist()]
    assert column.take(np.array([], np.int64)) == []


@pytest.mark.parametrize("kind", ["bytes", "str"])
def test_a_sliced_array_reads_its_own_rows(kind: str) -> None:
    array = pa.array(VALUES[kind] * 3, TYPES[kind][0]).slice(6, 7)
    column = decode_column(array, kind)
    expected = (VALUES[kind] * 3)[6:13]
    assert column.take(np.arange(7)) == expected
    lengths = [0 if v is None else len(v.encode() if isinstance(v, str) else v)
               for v in expected]
    assert column_lengths(column).tolist() == lengths


@pytest.mark.parametrize("kind", ["bytes", "str"])
def test_an_empty_column_reads_nothing(kind: str) -> None:
    column = decode_column(pa.array([], TYPES[kind][0]), kind)
    assert column.take(np.array([], np.int64)) == []
    assert column_lengths(column).tolist() == []


def test_text_lengths_count_utf8_bytes_and_nulls_count_zero() -> None:
    column = decode_column(pa.array(VALUES["str"], pa.string()), "str")
    assert column_lengths(column).tolist() == [1, 0, 0, len("héllo ✓".encode()), 4]


def test_each_read_makes_new_objects() -> None:
    column = decode_column(pa.array([b"x" * 100], pa.binary()), "bytes")
    first, second = column.take(np.array([0]))[0], column.take(np.array([0]))[0]
    assert first == second and type(first) is bytes


def test_other_layouts_are_decoded_as_python_values() -> None:
    array = pa.array([b"ab", None, b"cd"], pa.binary(2))  # fixed-size: no offsets buffer
    column = decode_column(array, "bytes")
    assert isinstance(column, ValueColumn)
    assert column.take(np.array([2, 1, 0])) == [b"cd", None, b"ab"]
