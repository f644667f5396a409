"""Shared test helpers for the packing tests: strategies and a one-at-a-time packer driver."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from streaming.packing import make_packer

STRATEGY_NAMES = ("first_fit", "window_1", "window_3", "window_7", "best_fit")


def as_lists(packs: list[np.ndarray]) -> list[list[int]]:
    """Packs as plain lists, for readable equality assertions."""
    return [p.tolist() for p in packs]


def push_one_by_one(strategy: str, capacity: int, lengths, **options) -> list[np.ndarray]:
    """Feed the streaming packer sample by sample (ids = positions), then flush."""
    packer = make_packer(strategy, capacity, **options)
    out: list[np.ndarray] = []
    for i, length in enumerate(lengths):
        out += packer.push(i, int(length))
    return out + packer.flush()


@st.composite
def packing_cases(draw, max_size: int = 120):
    """(capacity, lengths, strategy, options) with some overlong and zero-length samples."""
    capacity = draw(st.integers(1, 40))
    lengths = draw(st.lists(st.integers(0, 3 * capacity), max_size=max_size))
    strategy = draw(st.sampled_from(STRATEGY_NAMES))
    options = {
        "filter_overlong": draw(st.booleans()),
        "overlong": draw(st.sampled_from(["split", "alone"])),
        "buffer_size": draw(st.integers(1, 20)),
    }
    return capacity, lengths, strategy, options
