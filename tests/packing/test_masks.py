"""Block-diagonal causal masks: token i sees token j only inside its own segment, j <= i."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.packing.collate import PackCollator
from streaming.packing.masks import block_causal_mask, segment_ids


def brute_force(cu: list[int], rows: int, width: int) -> torch.Tensor:
    seg = np.zeros(rows * width, dtype=int)
    for k, (a, b) in enumerate(pairwise(cu)):
        seg[a:b] = k
    seg = seg.reshape(rows, width)
    out = torch.zeros(rows, 1, width, width, dtype=torch.bool)
    for r in range(rows):
        for i in range(width):
            for j in range(i + 1):
                out[r, 0, i, j] = bool(seg[r, i] == seg[r, j])
    return out


packs_st = st.lists(st.lists(st.lists(st.integers(1, 99), max_size=6), max_size=4),
                    min_size=1, max_size=3)


@given(packs_st, st.booleans())
def test_collator_mask_matches_the_definition(packs, pad) -> None:
    collator = PackCollator(12, pad=pad, block_mask=True, mask_dtype="bool")
    out = collator.batch(packs)
    rows, width = out["input_ids"].shape
    want = brute_force(out["cu_seqlens"].tolist(), rows, width)
    assert torch.equal(out["attention_mask"], want)
    assert want.any(dim=-1).all()  # every query sees at least itself (padding included)


def test_float_mask_is_additive_and_single_packs_drop_the_batch_dim() -> None:
    out = PackCollator(4, pad=True, block_mask=True).pack([[1, 2], [3]])
    mask = out["attention_mask"]
    assert mask.shape == (1, 4, 4) and mask.dtype == torch.float32
    low = torch.finfo(torch.float32).min
    assert mask[0].tolist() == [[0, low, low, low], [0, 0, low, low],
                                [low, low, 0, low], [low, low, low, 0]]
    half = PackCollator(4, block_mask=True, mask_dtype="bfloat16").pack([[1, 2]])
    assert half["attention_mask"].dtype == torch.bfloat16


def test_bad_mask_arguments_are_refused() -> None:
    with pytest.raises(PlanError, match="mask_dtype"):
        PackCollator(4, block_mask=True, mask_dtype="int8")
    with pytest.raises(PlanError, match="segment lengths"):
        segment_ids(np.array([2, 3]), 2, 3)
    with pytest.raises(PlanError, match="mask dtype"):
        block_causal_mask(np.zeros((1, 2)), "half")


def test_no_mask_unless_asked() -> None:
    assert "attention_mask" not in PackCollator(4).batch([[[1, 2]]])
