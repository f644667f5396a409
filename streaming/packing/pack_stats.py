"""Packing metrics: how full the packs are (real tokens over capacity), per batch and for the
packs a training loop took so far."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streaming.errors import PlanError

if TYPE_CHECKING:
    from streaming.packing.pack_planner import EpochPacks


@dataclass(frozen=True)
class PackStats:
    """Summary of a set of packs (what `pack_stats` and `PackCollator.stats` return).

    Args:
        packs: Number of packs.
        sequences: Real sequences the packs hold (0 when unknown).
        tokens: Real tokens in the packs (padding excluded).
        mean_length: Mean real tokens per pack.
        min_length: Fewest real tokens in a pack.
        max_length: Most real tokens in a pack.
        fill_rate: tokens / (packs * packing_length), from 0 to 1.
    """

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
    """Stats of packs from their real token counts.

    Args:
        pack_lengths: Real tokens of each pack (padding excluded), any array-like of ints.
        packing_length: Tokens per pack (the capacity), at least 1.
        sequences: Real sequences the packs hold (0 when unknown).
    """
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


@dataclass(frozen=True)
class PackFill:
    """Packs, the real tokens placed in them and the sequences (samples or pieces of split
    samples) they hold."""

    packs: int = 0
    tokens: int = 0
    sequences: int = 0

    def __add__(self, other: PackFill) -> PackFill:
        return PackFill(self.packs + other.packs, self.tokens + other.tokens,
                        self.sequences + other.sequences)


def fill_of(plan: EpochPacks, first: int, taken: int, lengths: np.ndarray, packing_length: int,
            split: bool) -> PackFill:
    """The fill of packs `first` .. `first + taken` of `plan` (fewer at its end); a pack's tokens
    are capped at `packing_length` (a truncated sample fills its pack)."""
    stop = min(first + max(taken, 0), plan.num_packs)
    part = plan.select(np.arange(min(first, stop), stop))
    tokens = np.minimum(part.tokens(lengths, packing_length, split), packing_length)
    return PackFill(part.num_packs, int(tokens.sum()), len(part.ids))


class PackCounts:
    """The fill of the packs a loop consumed, from the pack plan: the packs it took are the
    first ones of each iteration's planned order, so nothing is counted per pack while
    training.

    Args:
        packing_length: the token budget of one pack.
    """

    def __init__(self, packing_length: int) -> None:
        self.packing_length = int(packing_length)
        self.done = PackFill()
        self._fill: Callable[[int], PackFill] | None = None
        self._base = 0  # packs consumed when the current iteration began

    def begin(self, fill: Callable[[int], PackFill], consumed: int) -> None:
        """A new iteration's first `n` packs fill `fill(n)` (asked when counts are wanted and
        when the iteration ends); the loop had consumed `consumed` packs before it."""
        self.fold(consumed)
        self._fill, self._base = fill, consumed

    def fold(self, consumed: int) -> None:
        """The current iteration ended at `consumed` packs: its fill is counted now, so its
        pack plan is not kept."""
        if self._fill is not None:
            self.done = self.done + self._fill(consumed - self._base)
        self._fill, self._base = None, consumed

    def as_dict(self, consumed: int) -> dict[str, float]:
        """`packing/packs`, `packing/tokens`, `packing/fill_rate` (tokens over the packs'
        budget) and `packing/sequences_per_pack`, of the packs consumed so far."""
        now = self.done
        if self._fill is not None:
            now = now + self._fill(consumed - self._base)
        packs = max(now.packs, 1)
        return {"packing/packs": float(now.packs), "packing/tokens": float(now.tokens),
                "packing/fill_rate": now.tokens / (packs * self.packing_length),
                "packing/sequences_per_pack": now.sequences / packs}
