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
    """Build the streaming packer named `strategy`.

    Args:
        strategy: "best_fit" (default), "first_fit" or "window_XX" (e.g. "window_100").
        packing_length: Tokens per pack (the capacity; default 32000).
        filter_overlong: Drop samples longer than `packing_length`.
        buffer_size: best_fit's lookahead in samples; None: 1000. Other strategies ignore it.
        overlong: Without filtering: "split" cuts a long sample into `packing_length` pieces,
            "alone" makes it a pack of its own.
    """
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
