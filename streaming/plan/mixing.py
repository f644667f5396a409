"""Per-stream sample counts for one epoch from `proportion`, `repeat` or `choose` weights."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from streaming.errors import PlanError
from streaming.util.quantities import parse_count


@dataclass(frozen=True)
class StreamWeights:
    """How much of one stream an epoch uses; set at most one field.

    proportion: relative share of `epoch_size` (normalised over streams).
    repeat: absolute up/down sampling factor of the stream (fractions allowed).
    choose: absolute number of samples per epoch.
    All None: unweighted (or `repeat=1` when other streams use absolute weights).
    """

    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None

    def __post_init__(self) -> None:
        set_fields = [n for n in ("proportion", "repeat", "choose") if getattr(self, n) is not None]
        if len(set_fields) > 1:
            raise PlanError(f"StreamWeights takes one of proportion/repeat/choose: {set_fields}")
        for name in set_fields:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                                 np.floating)):
                raise PlanError(f"StreamWeights.{name} must be a number, got {value!r}")
            if not np.isfinite(value) or value < 0:
                raise PlanError(f"`{name}` must be non-negative: StreamWeights.{name} must be "
                                f"finite and >= 0, got {value!r}")
        if self.choose is not None and int(self.choose) != self.choose:
            raise PlanError(f"StreamWeights.choose must be a whole number, got {self.choose!r}")

    @property
    def scheme(self) -> str | None:
        """'relative', 'absolute' or None when nothing is set."""
        if self.proportion is not None:
            return "relative"
        if self.repeat is not None or self.choose is not None:
            return "absolute"
        return None


def parse_epoch_size(value: int | str | None) -> int | None:
    """`epoch_size` as an int: accepts 1000, '100k', '64M', '2b' (decimal units)."""
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and value < 0:
        raise PlanError(f"Epoch size cannot be negative: epoch_size={value!r}")
    try:
        return parse_count(value)
    except ValueError as exc:
        raise PlanError(f"epoch_size: {exc}") from None


def stream_targets(
    samples_per_stream: np.ndarray,
    weights: tuple[StreamWeights, ...],
    epoch_size: int | None,
    seed: int,
) -> np.ndarray:
    """Samples each stream contributes to every epoch (int64, fixed for the run).

    Relative weights: floor of each exact share plus one more for the streams with the largest
    remainders (as many as the floors leave over).
    """
    sizes = np.asarray(samples_per_stream, dtype=np.int64)
    if not weights:
        if epoch_size is None:
            return sizes.copy()
        weights = tuple(StreamWeights(proportion=float(n)) for n in sizes)
    if len(weights) != len(sizes):
        raise PlanError(f"weights has {len(weights)} entries for {len(sizes)} streams")
    schemes = {w.scheme for w in weights}
    if "relative" in schemes:
        if schemes != {"relative"}:
            raise PlanError(
                "Relative (`proportion`) and absolute (`repeat`, `choose`, none) stream weights "
                "are incompatible with each other: the streams mix proportion with "
                "repeat/choose (or leave some unset); "
                "use proportion on every stream, or only repeat/choose"
            )
        return _relative(sizes, np.array([w.proportion for w in weights], float), epoch_size, seed)
    if epoch_size is not None:
        raise PlanError("epoch_size cannot be combined with absolute weights (repeat/choose)")
    out = np.empty(len(sizes), dtype=np.int64)
    for s, (w, n) in enumerate(zip(weights, sizes)):
        if w.choose is not None:
            out[s] = int(w.choose)
        else:
            repeat = 1.0 if w.repeat is None else float(w.repeat)
            out[s] = int(np.floor(repeat * int(n) + 1e-9))
    _check_drawable(sizes, out)
    return out


def _relative(sizes: np.ndarray, props: np.ndarray, epoch_size: int | None, seed: int):
    """Largest-remainder split of the epoch, computed in exact rationals (floats such as
    0.6 x 200 must not floor to 119). Ties go to the lower stream index."""
    del seed  # the split is exact, so no draw is needed
    total = float(props.sum())
    if total <= 0:
        raise PlanError("stream proportions must not all be zero")
    epoch = int(sizes.sum()) if epoch_size is None else int(epoch_size)
    shares = [Fraction(float(p)) for p in props]
    whole = sum(shares)
    exact = [share * epoch / whole for share in shares]
    out = np.array([math.floor(x) for x in exact], dtype=np.int64)
    left = epoch - int(out.sum())
    if left:
        remainders = [x - math.floor(x) for x in exact]
        ranked = sorted(range(len(exact)), key=lambda s: (-remainders[s], s))
        out[ranked[:left]] += 1
    _check_drawable(sizes, out)
    return out


def _check_drawable(sizes: np.ndarray, targets: np.ndarray) -> None:
    bad = np.flatnonzero((sizes == 0) & (targets > 0))
    if len(bad):
        raise PlanError(f"stream {int(bad[0])} has no samples but is weighted to give some")
