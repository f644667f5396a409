"""Piece planning for row-group and index-range inputs: contiguous, complete, balanced."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from writers.convert.iterable import IterableSource
from writers.convert.parquet import ParquetSource
from writers.convert.source import even_bounds, ranges_to_pieces


def assert_cover(pieces, start: int, stop: int, limit: int) -> None:
    assert 1 <= len(pieces) <= max(1, limit)
    assert pieces[0].start == start and pieces[-1].stop == stop
    for i, (a, b) in enumerate(itertools.pairwise(pieces)):
        assert a.stop == b.start and a.index == i
    assert all(p.stop > p.start for p in pieces) or len(pieces) == 1


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40), st.integers(1, 12))
def test_parquet_pieces_are_row_ranges_near_even_shares(group_rows, count):
    source = ParquetSource.__new__(ParquetSource)
    source.group_rows, source.size = group_rows, sum(group_rows)
    source.group_starts = list(itertools.accumulate(group_rows, initial=0))
    pieces = source.pieces(count)
    assert_cover(pieces, 0, source.size, count)
    assert all(p.unit == "rows" for p in pieces)
    # Each cut is a row-group edge near an even share, or the even share itself (inside a
    # group): so a file of one row group still gives one piece per worker.
    share = source.size / max(1, len(even_bounds(source.size, count)) - 1)
    for k, piece in enumerate(pieces[1:], 1):
        even = source.size * k // len(even_bounds(source.size, count)[1:])
        assert piece.start in source.group_starts or piece.start == even
        assert abs(piece.start - even) <= share / 4 + 1


@given(st.integers(0, 500), st.integers(1, 16))
def test_index_ranges_are_even(total, count):
    pieces = ranges_to_pieces(even_bounds(total, count), "rows")
    assert_cover(pieces, 0, total, count)
    sizes = [p.stop - p.start for p in pieces]
    assert max(sizes) - min(sizes) <= 1


def test_iterables_split_only_when_they_are_sequences():
    assert len(IterableSource([{"a": i} for i in range(10)]).pieces(3)) == 3
    generated = IterableSource({"a": i} for i in range(10))
    assert [p.stop for p in generated.pieces(3)] == [-1]
    assert generated.head(2) == [{"a": 0}, {"a": 1}]
