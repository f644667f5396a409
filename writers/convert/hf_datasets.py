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


SIGNED = ("int8", "int16", "int32", "int64")


def narrowest_signed(low: int, high: int) -> str:
    """The narrowest signed integer dtype holding every value in [low, high]."""
    import numpy as np

    return next(name for name in SIGNED
                if np.iinfo(name).min <= low and high <= np.iinfo(name).max)


def narrowed(columns: dict[str, str], data: Any) -> dict[str, str]:
    """`columns` with each `ndarray:int64` column (what Python int lists become) given the
    narrowest signed dtype that holds all its values exactly, found in one pass over the
    Arrow data (a column of token ids below 2**31 becomes `ndarray:int32`)."""
    import pyarrow.compute as pc

    table = data.data.table if hasattr(data.data, "table") else data.data
    result = dict(columns)
    for name, encoding in columns.items():
        if encoding != "ndarray:int64" or name not in table.column_names:
            continue
        values = table.column(name)
        while hasattr(values.type, "value_type"):
            values = pc.list_flatten(values)
        bounds = pc.min_max(values).as_py()
        if bounds["min"] is not None:
            result[name] = "ndarray:" + narrowest_signed(bounds["min"], bounds["max"])
    return result


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
        self.schema_columns = narrowed(columns_from_arrow(data.features.arrow_schema), data)

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
