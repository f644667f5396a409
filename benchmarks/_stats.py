"""Statistics the benchmarks print: the median of paired ratios with a bootstrap interval, the
resolution of a run on a shared, noisy machine."""

from __future__ import annotations

import numpy as np


def median_interval(ratios: list[float], draws: int = 4000) -> tuple[float, float, float]:
    """The median of `ratios` and a 95% bootstrap interval of it (the median itself for a
    single ratio).

    Args:
        ratios: one ratio per round (each of two runs made in the same round).
        draws: bootstrap resamples.
    """
    values = np.asarray(ratios, dtype=float)
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(values, (draws, len(values))), axis=1)
    low, high = np.quantile(medians, [0.025, 0.975])
    return float(np.median(values)), float(low), float(high)
