"""Per-batch packing metrics: how full the packs are (real tokens over capacity)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from streaming.errors import PlanError


@dataclass(frozen=True)
class PackStats:
    """Summary of a set of packs; `fill_rate` = real tokens / (packs * packing_length)."""

    packs: int
    sequences: int
    tokens: int
    mean_length: float
    min_length: int
    max_length: int
    fill_rate: float

    def as_dict(self) -> dict[str, float]:
        """Plain dict for loggers."""
        return asdict(self)


def pack_stats(pack_lengths: Any, packing_length: int, sequences: int = 0) -> PackStats:
    """Stats of packs whose real token counts are `pack_lengths` (padding excluded); `sequences`
    is the number of real sequences they hold (0 when unknown)."""
    lens = np.asarray(pack_lengths, dtype=np.int64).reshape(-1)
    if packing_length < 1:
        raise PlanError(f"packing_length must be >= 1, got {packing_length}")
    if lens.size == 0:
        return PackStats(0, int(sequences), 0, 0.0, 0, 0, 0.0)
    tokens = int(lens.sum())
    return PackStats(
        packs=int(lens.size),
        sequences=int(sequences),
        tokens=tokens,
        mean_length=tokens / lens.size,
        min_length=int(lens.min()),
        max_length=int(lens.max()),
        fill_rate=tokens / (lens.size * packing_length),
    )
