"""Several input files of one format as one Source, laid end to end in input order.

File i occupies [offsets[i], offsets[i] + size_i) of one coordinate line (in the files' common
unit: bytes for text, rows for tables). A piece is a range of that line whose ends are file
edges or split points the file's own source chose (line starts, record starts, row ranges), so
one piece may hold several small files or part of a large one, and any split a file allows is
still available when it is one of many.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streaming.errors import ColumnMismatchError, EncodeError
from writers.convert.infer import infer_columns
from writers.convert.position import describe
from writers.convert.source import Cursor, Piece, Source, first_samples

HEAD_SAMPLES = 5  # records per file compared for the columns check (JSON Lines)


@dataclass(frozen=True)
class Member:
    """One file of the set: its source, its name in messages, and where it lies on the line."""

    source: Source
    name: str
    offset: int
    whole: Piece  # the file's own range (CSV data starts after the header)


class FileSetSource:
    """Files of one format converted as one input; `members` excludes empty files, which
    `empty` names."""

    def __init__(self, sources: list[tuple[str, Source]], empty: list[str],
                 fingerprints: list[dict]) -> None:
        self.empty = empty
        self._fingerprints = fingerprints
        offset, members = 0, []
        for name, source in sources:
            whole = source.pieces(1)[0]
            members.append(Member(source, name, offset, whole))
            offset += source.size
        self.members = members
        self.size = offset
        first = sources[0][1]
        self.size_unit = first.size_unit
        self.text_values = first.text_values
        self.label = f"{len(members)} files"
        schemas = [getattr(one, "schema_columns", None) for _, one in sources]
        if all(schema is not None for schema in schemas):
            self.schema_columns = widest(schemas)

    def spans(self) -> list[tuple[int, int]]:
        """Each member's [start, stop) on the coordinate line."""
        return [(m.offset, m.offset + m.source.size) for m in self.members]

    def pieces(self, count: int) -> list[Piece]:
        """About `count` pieces of near-equal size, cut at the member split point nearest each
        even share (whole files where they are small, inside a file where it is large)."""
        total = self.size
        candidates = {0, total}
        for m in self.members:
            share = max(1, round(count * m.source.size / max(1, total)))
            for p in m.source.pieces(share):
                candidates.update(self._clamp(m, edge) for edge in (p.start, p.stop))
        edges = sorted(candidates)
        bounds = [0]
        for i in range(1, count):
            target = total * i // count
            at = bisect.bisect_left(edges, target)
            near = min(edges[max(0, at - 1):at + 1], key=lambda e: abs(e - target))
            if near > bounds[-1]:
                bounds.append(near)
        if total > bounds[-1] or len(bounds) == 1:
            bounds.append(total)
        return [Piece(i, lo, hi, "files") for i, (lo, hi) in enumerate(itertools.pairwise(bounds))]

    def _clamp(self, member: Member, local: int) -> int:
        """A member's own split point on the coordinate line (its first and last map to its
        edges, so a CSV header belongs to its file's first piece)."""
        if local <= member.whole.start:
            return member.offset
        if local >= member.whole.stop:
            return member.offset + member.source.size
        return member.offset + local

    def segments(self, piece: Piece) -> Iterator[tuple[int, Piece]]:
        """(member number, the member's own piece) for each file `piece` covers."""
        starts = [m.offset for m in self.members]
        first = max(0, bisect.bisect_right(starts, piece.start) - 1)
        for number in range(first, len(self.members)):
            m = self.members[number]
            end = m.offset + m.source.size
            if m.offset >= piece.stop:
                break
            if end <= piece.start:
                continue
            lo = m.whole.start if piece.start <= m.offset else piece.start - m.offset
            hi = m.whole.stop if piece.stop >= end else piece.stop - m.offset
            yield number, Piece(0, lo, hi, m.whole.unit)

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        for number, local in self.segments(piece):
            m = self.members[number]
            inner = Cursor()
            before = max(m.offset, piece.start) - piece.start
            cursor.file = number
            for record in m.source.records(local, inner):
                cursor.at, cursor.line, cursor.row = inner.at, inner.line, inner.row
                cursor.done = before + inner.done
                yield record
            cursor.done = min(piece.stop, m.offset + m.source.size) - piece.start

    def where(self, cursor: Cursor) -> str:
        """'FILE: line N' or 'FILE: row N (row group G)' for the record `cursor` last saw."""
        m = self.members[max(0, cursor.file)]
        return describe(m.source, m.name, cursor) or m.name

    def fingerprint(self) -> dict:
        return {"files": self._fingerprints}


_SIGNED_ARRAYS = ("ndarray:int8", "ndarray:int16", "ndarray:int32", "ndarray:int64")


def widest(schemas: list[dict[str, str]]) -> dict[str, str]:
    """The first schema, each signed integer array column widened to the widest dtype any
    schema gives it (files whose int lists were narrowed to different widths)."""
    result = dict(schemas[0])
    for name, encoding in result.items():
        if encoding in _SIGNED_ARRAYS:
            found = [s.get(name) for s in schemas]
            if all(e in _SIGNED_ARRAYS for e in found):
                result[name] = max(found, key=_SIGNED_ARRAYS.index)
    return result


def _same(mine: str | None, other: str | None) -> bool:
    """Whether two files' encodings of a column agree (unknown ones, from a CSV header, do;
    signed integer arrays of different widths widen to the wider)."""
    if mine is None or other is None or mine == other:
        return True
    return mine in _SIGNED_ARRAYS and other in _SIGNED_ARRAYS


def file_columns(source: Source, chosen: Mapping[str, Any]) -> dict[str, str | None]:
    """One file's columns for the consistency check: its schema (Parquet, HF), its header (CSV,
    encodings unknown: None), or what its first records imply (JSON Lines; the columns in
    `chosen` are not inferred)."""
    schema = getattr(source, "schema_columns", None)
    if schema is not None:
        return dict(schema)
    header = getattr(source, "header", None)
    if header is not None:
        return dict.fromkeys(header)
    samples = first_samples(source, None, HEAD_SAMPLES)
    names = {key for sample in samples for key in sample}
    given = {key: None for key in chosen if key in names}
    try:
        return dict(infer_columns(samples, given)) if samples else {}
    except EncodeError:  # values this few records cannot decide: compare the names only
        return dict.fromkeys(key for sample in samples for key in sample)


def check_same_columns(members: list[tuple[str, Source]], chosen: Mapping[str, Any],
                       columns_of: Callable[..., dict[str, str | None]] = file_columns
                       ) -> None:
    """ColumnMismatchError naming the first file, a file that differs and the column, unless
    `chosen` (the user's columns=) decides that column."""
    if len(members) < 2:
        return
    first_name, first = members[0]
    reference = columns_of(first, chosen)
    for name, source in members[1:]:
        theirs = columns_of(source, chosen)
        for column in sorted(set(reference) | set(theirs)):
            if column in chosen:
                continue
            mine, other = reference.get(column, "-"), theirs.get(column, "-")
            if column in reference and column in theirs and _same(mine, other):
                continue
            raise ColumnMismatchError(first_name, name, column, _says(mine), _says(other))


def _says(encoding: str | None) -> str:
    return "missing" if encoding == "-" else f"'{encoding}'" if encoding else "present"
