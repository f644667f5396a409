"""Hugging Face `datasets` input (extra `hf`): an in-memory Dataset or a save_to_disk folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streaming.errors import FormatError, require
from writers.convert.parquet import columns_from_arrow
from writers.convert.source import Cursor, Piece, even_bounds, ranges_to_pieces

BATCH_ROWS = 4096


def _datasets():
    return require("datasets", feature="Hugging Face conversion", extra="hf")


class HFSource:
    """Rows of a `datasets.Dataset`, split into contiguous index ranges."""

    size_unit = "rows"
    text_values = False

    def __init__(self, data: Any) -> None:
        hf = _datasets()
        self.path: Path | None = None
        if isinstance(data, (str, Path)):
            self.path = Path(data)
            try:
                data = hf.load_from_disk(str(self.path))
            except FileNotFoundError as exc:
                raise FileNotFoundError(
                    f"{self.path} is not a dataset folder written by save_to_disk"
                ) from exc
        if isinstance(data, hf.DatasetDict):
            raise FormatError(
                f"a DatasetDict with splits {sorted(data)} was given; convert one split, "
                "e.g. data['train']"
            )
        if not isinstance(data, hf.Dataset):
            raise TypeError(f"expected a datasets.Dataset, got {type(data).__name__}")
        self.dataset = data
        self.label = str(self.path) if self.path else f"datasets.Dataset({len(data)} rows)"
        self.size = len(data)
        self.schema_columns = columns_from_arrow(data.features.arrow_schema)

    def pieces(self, count: int) -> list[Piece]:
        return ranges_to_pieces(even_bounds(self.size, count), "rows")

    def records(self, piece: Piece, cursor: Cursor) -> Iterator[dict]:
        for start in range(piece.start, piece.stop, BATCH_ROWS):
            stop = min(start + BATCH_ROWS, piece.stop)
            batch = self.dataset[start:stop]
            names = list(batch)
            for values in zip(*(batch[name] for name in names)):
                yield dict(zip(names, values))
            cursor.done = stop - piece.start

    def fingerprint(self) -> dict:
        if self.path is not None:
            stat = os.stat(self.path)
            return {"path": str(self.path.resolve()), "mtime": stat.st_mtime_ns,
                    "rows": self.size}
        return {"dataset": self.dataset._fingerprint, "rows": self.size}
