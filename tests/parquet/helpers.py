"""Parquet files for the Parquet-stream tests: rows whose every column is a function of the row's
id, so a test can tell any wrong, missing or repeated sample from the id alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def tokens_of(i: int) -> np.ndarray:
    """Row `i`'s token list (length 1 + i % 9)."""
    return (np.arange(1 + i % 9, dtype=np.int32) + i).astype(np.int32)


def table(start: int, count: int) -> pa.Table:
    """Rows `start`..`start + count - 1`: id, text, tokens (list<int32>), blob (binary),
    meta (struct), maybe (int64, null on every third row)."""
    ids = list(range(start, start + count))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "text": pa.array([f"row {i}" for i in ids], pa.string()),
        "tokens": pa.array([tokens_of(i).tolist() for i in ids], pa.list_(pa.int32())),
        "blob": pa.array([bytes([i % 256]) * (i % 5) for i in ids], pa.binary()),
        "meta": pa.array([{"a": i, "b": f"m{i}"} for i in ids],
                         pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "maybe": pa.array([None if i % 3 == 0 else i for i in ids], pa.int64()),
    })


def write_files(folder: Path, files: int = 3, rows: int = 300, row_group: int = 64,
                compression: str = "zstd", start: int = 0, name: str = "part") -> list[Path]:
    """`files` Parquet files of `rows` rows each in `folder`, ids from `start` upward."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = folder / f"{name}-{f:03d}.parquet"
        pq.write_table(table(start + f * rows, rows), path, row_group_size=row_group,
                       compression=compression)
        paths.append(path)
    return paths


def assert_sample(sample: dict[str, Any]) -> int:
    """Assert `sample` is exactly the row its id names; return the id."""
    i = int(sample["id"])
    assert sample["text"] == f"row {i}"
    np.testing.assert_array_equal(sample["tokens"], tokens_of(i))
    assert isinstance(sample["tokens"], np.ndarray) and sample["tokens"].dtype == np.int32
    assert sample["blob"] == bytes([i % 256]) * (i % 5)
    assert sample["meta"] == {"a": i, "b": f"m{i}"}
    assert sample["maybe"] == (None if i % 3 == 0 else i)
    return i
