"""Any Python iterable of dicts: sequences split by index, other iterables read in one piece."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from streaming.errors import FormatError
from writers.convert.source import Cursor, Piece, even_bounds, ranges_to_pieces


class IterableSource:
    """Records from a list/tuple (splittable) or from a one-shot iterator such as a generator."""

    size_unit = "records"
    text_values = False

    def __init__(self, data: Iterable[dict[str, Any]]) -> None:
        if isinstance(data, (str, bytes, dict)) or not isinstance(data, Iterable):
            raise TypeError(f"expected an iterable of dicts, got {type(data).__name__}")
        self.sequence = data if isinstance(data, Sequence) else None
        self._iterator: Iterator | None = None if self.sequence is not None else iter(data)
        self._head: list[dict] = []
        self.size = len(self.sequence) if self.sequence is not None else 0
        self.label = f"{type(data).__name__} of records"

    def head(self, limit: int) -> list[dict]:
        """The first `limit` records, without losing them for the conversion that follows."""
        if self.sequence is not None:
            return list(itertools.islice(self.sequence, limit))
        assert self._iterator is not None
        self._head.extend(itertools.islice(self._iterator, max(0, limit - len(self._head))))
        return self._head[:limit]

    def pieces(self, count: int) -> list[Piece]:
        if self.sequence is None:
            return [Piece(0, 0, -1, "records")]
        return ranges_to_pieces(even_bounds(self.size, count), "records")

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        if self.sequence is not None:
            seq = self.sequence
            items: Iterable = (seq[i] for i in range(piece.start, piece.stop))
        else:
            if self._iterator is None:
                raise FormatError(f"{self.label} was already consumed; pass a list to re-read")
            items, self._iterator = itertools.chain(self._head, self._iterator), None
        for position, record in enumerate(items, 1):
            if not isinstance(record, dict):
                raise FormatError(
                    f"{self.label}: record {piece.start + position - 1} is a "
                    f"{type(record).__name__}, expected a dict"
                )
            yield record
            cursor.done = position

    def fingerprint(self) -> dict:
        return {"iterable": self.label, "records": self.size}
