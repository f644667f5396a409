"""The length of one sample value, as recorded in the per-shard lengths side files
(`shard.00000.mds.lengths`, see format/index.py's LENGTHS_* names): the writer records it and
the packers read it, so the rule lives here, below both."""

from __future__ import annotations

from typing import Any

import numpy as np


def value_length(value: Any) -> int:
    """Token count of one column value: an integer is a count itself, text counts UTF-8 bytes,
    anything array-like counts its elements (the rule the header scan follows too)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    return int(np.asarray(value).size)
