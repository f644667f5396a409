"""Piece planning for row-group and index-range inputs: contiguous, complete, balanced."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from writers.convert.iterable import IterableSource
from writers.convert.parquet import ParquetSource
from writers.convert.source import even_bounds, ranges_to_pieces


def check_cover(pieces, start: int, stop: int, limit: int) -> None:
    assert 1 <= len(pieces) <= max(1, limit)
    assert pieces[0].start == start and pieces[-1].stop == stop
    for i, (a, b) in enumerate(itertools.pairwise(pieces)):
        assert a.stop == b.start and a.index == i
    assert all(p.stop > p.start for p in pieces) or len(pieces) == 1


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40), st.integers(1, 12))
def test_parquet_pieces_follow_row_groups(group_rows, count):
    source = ParquetSource.__new__(ParquetSource)
    source.group_rows, source.size = group_rows, sum(group_rows)
    pieces = source.pieces(count)
    check_cover(pieces, 0, len(group_rows), count)
    # The k-th cut comes only once the rows before it reach k shares of the total.
    for k, piece in enumerate(pieces[1:], 1):
        assert sum(group_rows[: piece.start]) * count >= source.size * k


@given(st.integers(0, 500), st.integers(1, 16))
def test_index_ranges_are_even(total, count):
    pieces = ranges_to_pieces(even_bounds(total, count), "rows")
    check_cover(pieces, 0, total, count)
    sizes = [p.stop - p.start for p in pieces]
    assert max(sizes) - min(sizes) <= 1


def test_iterables_split_only_when_they_are_sequences():
    assert len(IterableSource([{"a": i} for i in range(10)]).pieces(3)) == 3
    generated = IterableSource({"a": i} for i in range(10))
    assert [p.stop for p in generated.pieces(3)] == [-1]
    assert generated.head(2) == [{"a": 0}, {"a": 1}]
