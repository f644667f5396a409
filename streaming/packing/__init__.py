"""Sequence packing: pure planners over lengths, streaming packers with plain-data state, and
(lazily imported, torch-based) collators and an on-the-fly packing iterator."""

from __future__ import annotations

import importlib
from typing import Any

from streaming.packing.base import Packer
from streaming.packing.best_fit import BestFitPacker
from streaming.packing.first_fit import FirstFitPacker
from streaming.packing.metrics import PackStats, pack_stats
from streaming.packing.mixing import measured_token_shares, realised_token_shares, token_mix_counts
from streaming.packing.planner import pack_lengths, plan_packs
from streaming.packing.registry import STRATEGIES, make_packer
from streaming.packing.window import WindowPacker

_LAZY = {
    "PackCollator": "streaming.packing.collate",
    "PackedIterator": "streaming.packing.iterator",
}

__all__ = [
    "STRATEGIES",
    "BestFitPacker",
    "FirstFitPacker",
    "PackCollator",
    "PackStats",
    "PackedIterator",
    "Packer",
    "WindowPacker",
    "make_packer",
    "measured_token_shares",
    "pack_lengths",
    "pack_stats",
    "plan_packs",
    "realised_token_shares",
    "token_mix_counts",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.packing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
