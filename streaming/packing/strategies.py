"""Strategy names users type in configs (`first_fit`, `window_100`, `best_fit`) -> packers."""

from __future__ import annotations

import re
from typing import Any

from streaming.errors import PlanError
from streaming.packing.best_fit import BestFitPacker
from streaming.packing.first_fit import FirstFitPacker
from streaming.packing.packer import Packer
from streaming.packing.window import WindowPacker

STRATEGIES = ("best_fit", "first_fit", "window_XX")
OFFLINE = "offline_bfd"  # best-fit decreasing over the whole input: precomputed mode only
_WINDOW = re.compile(r"^window_([0-9]+)$")


def make_packer(
    strategy: str = "best_fit",
    packing_length: int = 32000,
    *,
    filter_overlong: bool = True,
    overlong: str = "split",
    buffer_size: int | None = None,
) -> Packer:
    """Build the streaming packer named `strategy` (`buffer_size` only applies to best_fit)."""
    options: dict[str, Any] = {"filter_overlong": filter_overlong, "overlong": overlong}
    if not isinstance(strategy, str):
        raise PlanError(f"packing_strategy must be a string, got {strategy!r}")
    if strategy == "best_fit":
        return BestFitPacker(packing_length, buffer_size=buffer_size, **options)
    if strategy == "first_fit":
        return FirstFitPacker(packing_length, **options)
    match = _WINDOW.match(strategy)
    if match:
        return WindowPacker(packing_length, window=int(match.group(1)), **options)
    raise PlanError(
        f"unknown packing_strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        f" (XX = window size, e.g. window_100) or {OFFLINE!r} for precomputed plans"
    )
