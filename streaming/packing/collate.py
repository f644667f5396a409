"""Turn packs of token sequences into the tensors flash-attention varlen kernels expect.

One pack -> 1-D tensors; several packs -> [B, W] tensors whose `cu_seqlens` index the flattened
B*W tokens. Padding (pad id, label -100) is its own segment in `cu_seqlens`, with positions
restarting at 0, so `cu_seqlens[-1]` always equals the number of tokens in `input_ids`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from streaming.errors import PlanError
from streaming.packing.masks import MASK_DTYPES, block_causal_mask, segment_ids
from streaming.packing.pack_stats import PackStats, pack_stats

IGNORE_INDEX = -100


@dataclass(frozen=True)
class PackCollator:
    """Collate packs (lists of token arrays).

    `pad`: pad every pack to `packing_length` (a batch is always padded to one common width:
    `packing_length` when `pad`, else the longest pack; an overlong pack kept alone widens it).
    `mask_first_label`: label the first token of each sequence `ignore_index`, so a causal LM
    never learns to predict a sequence's start from the previous sequence in the same pack.
    Zero-length sequences are dropped (they have no tokens and would repeat a cu_seqlens entry).
    `block_mask`: also return `attention_mask`, a [B, 1, W, W] block-diagonal causal mask of
    `mask_dtype` ("bool", or a float dtype for an additive mask; see streaming.packing.masks)
    for attention implementations that isolate packed sequences only through a mask.
    """

    packing_length: int
    pad: bool = False
    pad_id: int = 0
    mask_first_label: bool = True
    ignore_index: int = IGNORE_INDEX
    block_mask: bool = False
    mask_dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.packing_length < 1:
            raise PlanError(f"packing_length must be >= 1, got {self.packing_length}")
        if self.mask_dtype not in MASK_DTYPES:
            raise PlanError(f"mask_dtype must be one of {MASK_DTYPES}, got {self.mask_dtype!r}")

    def pack(self, sequences: Sequence[Any]) -> dict[str, Any]:
        """Collate one pack into 1-D tensors (see `batch` for the keys)."""
        out = self.batch([sequences])
        for key in ("input_ids", "labels", "position_ids"):
            out[key] = out[key].reshape(-1)
        if "attention_mask" in out:
            out["attention_mask"] = out["attention_mask"][0]
        return out

    def batch(self, packs: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """Collate packs into [B, W] tensors.

        Keys: input_ids, labels, position_ids (int64 [B, W]); cu_seqlens (int32 [S+1], leading 0,
        over the flattened B*W tokens, padding segments included); seq_lens (int32 [S], the
        differences of cu_seqlens); seq_is_pad (bool [S]); max_seqlen (int, longest segment);
        pack_lengths (int64 [B], real tokens per row); with `block_mask`, attention_mask
        ([B, 1, W, W], see `streaming.packing.masks.block_causal_mask`).
        """
        if len(packs) == 0:
            raise PlanError("cannot collate an empty batch of packs")
        rows = [[np.asarray(s).reshape(-1) for s in pack] for pack in packs]
        rows = [[s for s in row if s.size] for row in rows]
        real = np.array([sum(s.size for s in row) for row in rows], dtype=np.int64)
        width = max(int(real.max()), self.packing_length if self.pad else 0, 1)
        pieces: list[np.ndarray] = []
        seg_lens: list[int] = []
        seg_pad: list[bool] = []
        for row, used in zip(rows, real.tolist()):
            pieces += row
            seg_lens += [s.size for s in row]
            seg_pad += [False] * len(row)
            if used < width:
                pieces.append(np.full(width - used, self.pad_id, dtype=np.int64))
                seg_lens.append(width - used)
                seg_pad.append(True)
        tokens = np.concatenate([p.astype(np.int64, copy=False) for p in pieces])
        lens = np.asarray(seg_lens, dtype=np.int64)
        is_pad = np.asarray(seg_pad, dtype=bool)
        cu = np.zeros(lens.size + 1, dtype=np.int64)
        np.cumsum(lens, out=cu[1:])
        starts = cu[:-1]
        positions = np.arange(tokens.size, dtype=np.int64) - np.repeat(starts, lens)
        labels = tokens.copy()
        labels[np.repeat(is_pad, lens)] = self.ignore_index
        if self.mask_first_label:
            labels[starts[~is_pad]] = self.ignore_index
        shape = (len(rows), width)
        out = {
            "input_ids": torch.from_numpy(tokens.reshape(shape)),
            "labels": torch.from_numpy(labels.reshape(shape)),
            "position_ids": torch.from_numpy(positions.reshape(shape)),
            "cu_seqlens": torch.from_numpy(cu.astype(np.int32)),
            "seq_lens": torch.from_numpy(lens.astype(np.int32)),
            "seq_is_pad": torch.from_numpy(is_pad),
            "max_seqlen": int(lens.max()),
            "pack_lengths": torch.from_numpy(real),
        }
        if self.block_mask:
            out["attention_mask"] = block_causal_mask(segment_ids(lens, *shape), self.mask_dtype)
        return out

    def stats(self, batch: dict[str, Any]) -> PackStats:
        """Fill metrics of a collated batch (padding excluded)."""
        sequences = int((~batch["seq_is_pad"]).sum())
        return pack_stats(batch["pack_lengths"].numpy(), self.packing_length, sequences)
