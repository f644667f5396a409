"""Sequence packing: pure planners over lengths and streaming packers with plain-data state.

The torch-based pieces live in their own modules so importing this package never pulls torch:
`streaming.packing.collate.PackCollator` and `streaming.packing.iterator.PackedIterator`.
"""

from __future__ import annotations

from streaming.dataset.token_mix import (
    measured_token_shares,
    realised_token_shares,
    token_mix_counts,
)
from streaming.packing.best_fit import BestFitPacker
from streaming.packing.first_fit import FirstFitPacker
from streaming.packing.pack_planner import pack_lengths, plan_packs
from streaming.packing.pack_stats import PackStats, pack_stats
from streaming.packing.packer import Packer
from streaming.packing.strategies import STRATEGIES, make_packer
from streaming.packing.window import WindowPacker

__all__ = [
    "STRATEGIES",
    "BestFitPacker",
    "FirstFitPacker",
    "PackStats",
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

