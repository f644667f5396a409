"""Read a converted dataset back as plain Python values, for comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """numpy arrays/scalars -> lists/Python scalars, so samples compare with ==."""
    if isinstance(value, np.ndarray):
        return [value.dtype.name, value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_samples(out: str | Path) -> list[dict[str, Any]]:
    from streaming.dataset.local_dataset import LocalDataset

    dataset = LocalDataset(out)
    return [{k: plain(v) for k, v in dataset[i].items()} for i in range(len(dataset))]
