"""What every converter input provides: contiguous pieces of work and the records inside one.

A piece is plain data (picklable, JSON-able) so worker processes and resume markers can carry it;
reading a piece happens in the worker, next to the writer.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from streaming.errors import EncodeError

Transform = Callable[[dict], "dict | Iterable[dict] | None"]


@dataclass(frozen=True)
class Piece:
    """A contiguous range of the input: [start, stop) in `unit` (bytes, rows, row groups...)."""

    index: int
    start: int
    stop: int
    unit: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Piece:
        return cls(int(data["index"]), int(data["start"]), int(data["stop"]), str(data["unit"]))


class Cursor:
    """How much of the current piece a reader has consumed, in the source's size units."""

    __slots__ = ("at", "done", "file", "line", "row")

    def __init__(self) -> None:
        self.done = 0
        self.at = -1  # byte offset of the record last yielded, when the source knows it
        self.line = -1  # its 1-based line, when a text source counts lines (compressed input)
        self.row = -1  # its 0-based row in its file, for row-addressed sources
        self.file = -1  # the input file it came from, for inputs of several files


class Source(Protocol):
    """A splittable input. `size` (in `size_unit`) drives the progress bar and piece count."""

    label: str
    size: int
    size_unit: str
    text_values: bool  # values are strings that may need parsing for non-str columns (CSV)

    def pieces(self, count: int) -> list[Piece]:
        """At most `count` contiguous pieces covering the whole input, in input order."""

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        """The records of one piece, in input order, moving `cursor.done` along (in a worker)."""

    def fingerprint(self) -> dict:
        """What identifies this input for resumption (path, size, mtime...)."""


def even_bounds(total: int, count: int) -> list[int]:
    """count+1 boundaries splitting range(total) into `count` near-equal contiguous parts."""
    count = max(1, min(count, total)) if total else 1
    return [total * i // count for i in range(count + 1)]


def ranges_to_pieces(bounds: list[int], unit: str) -> list[Piece]:
    """Pieces from increasing boundaries, dropping empty ranges (but keeping one if all empty)."""
    pieces = [
        Piece(0, lo, hi, unit) for lo, hi in itertools.pairwise(bounds) if hi > lo
    ] or [Piece(0, bounds[0], bounds[-1], unit)]
    return [Piece(i, p.start, p.stop, unit) for i, p in enumerate(pieces)]


def samples_from(record: dict, transform: Transform | None, where: str) -> Iterable[dict]:
    """The zero, one or several samples a user transform makes of one record."""
    if transform is None:
        return (record,)
    out = transform(record)
    if out is None:
        return ()
    if isinstance(out, dict):
        return (out,)
    if isinstance(out, (str, bytes)) or not isinstance(out, Iterable):
        raise EncodeError(
            f"{where}: transform must return None, a dict or an iterable of dicts, "
            f"got {type(out).__name__}"
        )
    return out


def first_samples(
    source: Source, transform: Transform | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` transformed samples from the start of the input (for column inference)."""
    found: list[dict[str, Any]] = []
    if hasattr(source, "head"):
        for record in source.head(limit):
            found.extend(samples_from(record, transform, source.label))
        return found[:limit]
    for piece in source.pieces(1):
        for record in source.records(piece, Cursor()):
            found.extend(samples_from(record, transform, source.label))
            if len(found) >= limit:
                return found[:limit]
    return found


def input_file(path: str | os.PathLike, kind: str) -> Path:
    """The path of an input file, or FileNotFoundError naming it and its expected kind."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{kind} input {path} does not exist or is not a file")
    return path


def file_fingerprint(path: Path) -> dict:
    """Identity of an input file for resumption: where it is, its size and modification time."""
    stat = os.stat(path)
    return {"path": str(path.resolve()), "bytes": stat.st_size, "mtime": stat.st_mtime_ns}
