"""Token datasets for the packing integration tests (written with MDSWriter)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from writers.mds import MDSWriter

COLUMNS = {"tokens": "ndarray:int32", "id": "int"}


def write_tokens(out: Path, n: int, *, start: int = 0, max_len: int = 300, seed: int = 0,
                 lengths: object = "tokens", size_limit: int = 1 << 14,
                 compression: str | None = None, hashes: list[str] | None = None) -> np.ndarray:
    """Sample i holds `id` = start + i and `tokens` = [start + i] * L_i; returns the L_i."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_len + 1, n)
    with MDSWriter(columns=COLUMNS, out=out, size_limit=size_limit, lengths=lengths,
                   compression=compression, hashes=hashes) as writer:
        for i, size in enumerate(sizes.tolist()):
            writer.write({"id": start + i, "tokens": np.full(size, start + i, np.int32)})
    return sizes
