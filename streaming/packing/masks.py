"""Attention masks that keep the sequences of a pack apart, for models without a varlen kernel.

A pack is several sequences laid end to end in one row. Flash-attention varlen kernels isolate
them with `cu_seqlens`; an sdpa or eager attention needs a mask instead: token i of a row may
attend to token j of the same row only when both belong to the same segment and j <= i
(block-diagonal and causal). Padding is a segment of its own, so no row is fully masked.
"""

from __future__ import annotations

import numpy as np
import torch

from streaming.errors import PlanError

MASK_DTYPES = ("bool", "float32", "float16", "bfloat16", "float64")


def segment_ids(seg_lens: np.ndarray, rows: int, width: int) -> np.ndarray:
    """[rows, width] int32: the index of each token's segment (segments numbered over the
    flattened batch, in order), from the segment lengths of a collated batch."""
    lens = np.asarray(seg_lens, dtype=np.int64)
    if int(lens.sum()) != rows * width:
        raise PlanError(f"segment lengths sum to {int(lens.sum())}, not rows x width = "
                        f"{rows} x {width}")
    return np.repeat(np.arange(lens.size, dtype=np.int32), lens).reshape(rows, width)


def block_causal_mask(segments: np.ndarray, dtype: str = "float32") -> torch.Tensor:
    """[B, 1, W, W] mask from [B, W] segment ids: query i sees key j when both are in one
    segment and j <= i.

    `dtype="bool"` gives True where attention is allowed (torch sdpa's convention); a float
    dtype gives an additive mask, 0 where allowed and the dtype's most negative value elsewhere
    (what eager attention adds to its scores; sdpa accepts it too when it matches the model's
    dtype).
    """
    if dtype not in MASK_DTYPES:
        raise PlanError(f"mask dtype must be one of {MASK_DTYPES}, got {dtype!r}")
    seg = np.asarray(segments)
    width = seg.shape[-1]
    causal = np.tril(np.ones((width, width), dtype=bool))
    allowed = torch.from_numpy((seg[:, :, None] == seg[:, None, :]) & causal)[:, None]
    if dtype == "bool":
        return allowed
    float_dtype = getattr(torch, dtype)
    mask = torch.zeros(allowed.shape, dtype=float_dtype)
    return mask.masked_fill_(~allowed, torch.finfo(float_dtype).min)
