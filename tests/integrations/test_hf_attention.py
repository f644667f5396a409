"""Packed sequences stay apart in transformers' sdpa and eager attention: a packed batch's
logits equal running each sequence alone, for the inputs docs/packing.md recommends."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import torch

from streaming.integrations.hf import to_model_inputs
from streaming.packing.collate import PackCollator
from tests.integrations.hf_run import PACKING_LENGTH, tiny_gpt2

# Two rows of packs; the second row is padded (the padding is a segment of its own).
PACKS = [[[5, 6, 7, 8, 9, 10, 11], [40, 41, 42], [3] * 12, [60, 61, 62, 63, 0, 1, 2, 3, 4, 5]],
         [[20, 21, 22, 23, 24], [7, 1, 7, 1, 7, 1, 7, 1, 7]]]


def alone(model, packs) -> list[torch.Tensor]:
    """Each sequence's logits when it is the only input."""
    out = []
    for pack in packs:
        for seq in pack:
            ids = torch.tensor([seq])
            out.append(model(input_ids=ids, use_cache=False).logits[0])
    return out


def packed(logits: torch.Tensor, batch: dict) -> list[torch.Tensor]:
    """The packed logits cut back into sequences (padding dropped)."""
    flat = logits.reshape(-1, logits.shape[-1])
    cu = batch["cu_seqlens"].tolist()
    return [flat[a:b] for a, b, pad in zip(cu[:-1], cu[1:], batch["seq_is_pad"].tolist())
            if not pad]


def max_difference(model, collator: PackCollator) -> float:
    batch = collator.batch([[np.array(s) for s in pack] for pack in PACKS])
    with torch.no_grad():
        logits = model(**to_model_inputs(batch)).logits
        pairs = zip(packed(logits, batch), alone(model, PACKS), strict=True)
        return max(float((a - b).abs().max()) for a, b in pairs)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_position_ids_without_kv_cache_isolate_sequences(attn: str) -> None:
    model = tiny_gpt2(attn, use_cache=False).eval()
    assert max_difference(model, PackCollator(PACKING_LENGTH, pad=True)) < 1e-5


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_kv_cache_lets_packed_sequences_attend_to_each_other(attn: str) -> None:
    # The trap StreamingTrainer closes by turning use_cache off.
    model = tiny_gpt2(attn, use_cache=True).eval()
    assert max_difference(model, PackCollator(PACKING_LENGTH, pad=True)) > 1e-3


@pytest.mark.parametrize(("attn", "dtype"), [("sdpa", "float32"), ("eager", "float32"),
                                             ("sdpa", "bool")])
def test_the_block_mask_isolates_sequences_even_with_a_kv_cache(attn: str, dtype: str) -> None:
    model = tiny_gpt2(attn, use_cache=True).eval()
    collator = PackCollator(PACKING_LENGTH, pad=True, block_mask=True, mask_dtype=dtype)
    assert max_difference(model, collator) < 1e-5


def varlen_reference(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                     cu_seq_lens_q=None, cu_seq_lens_k=None, max_length_q=None, **kwargs):
    """A CPU stand-in for flash_attn_varlen_func behind transformers' attention interface:
    flatten the [B, W] rows like the flash path does and attend causally within each
    `cu_seq_lens` segment only (position_ids are not looked at)."""
    rows, heads, width, dim = query.shape
    q, k, v = (t.transpose(1, 2).reshape(rows * width, heads, dim) for t in (query, key, value))
    out = torch.zeros_like(q)
    if cu_seq_lens_q is None:  # an unpacked input: each row is one sequence
        cu, max_length_q = list(range(0, rows * width + 1, width)), width
    else:
        assert torch.equal(cu_seq_lens_q, cu_seq_lens_k)
        cu = cu_seq_lens_q.tolist()
    assert cu[0] == 0 and cu[-1] == rows * width
    for a, b in pairwise(cu):
        assert b - a <= max_length_q
        seg = torch.nn.functional.scaled_dot_product_attention(
            q[a:b].transpose(0, 1), k[a:b].transpose(0, 1), v[a:b].transpose(0, 1),
            is_causal=True, scale=scaling)
        out[a:b] = seg.transpose(0, 1)
    return out.reshape(rows, width, heads, dim), None


def test_varlen_kwargs_isolate_sequences_in_a_varlen_kernel() -> None:
    # Flash attention needs a GPU; the same kwargs reach a registered CPU varlen kernel.
    from transformers import AttentionInterface

    AttentionInterface.register("streaming_varlen_reference", varlen_reference)
    model = tiny_gpt2("streaming_varlen_reference", use_cache=True).eval()
    assert max_difference(model, PackCollator(PACKING_LENGTH, pad=True)) < 1e-5


def test_the_model_inputs_name_flash_varlen_kwargs() -> None:
    batch = PackCollator(PACKING_LENGTH).batch([[np.arange(1, 4), np.arange(1, 3)], [[9] * 4]])
    inputs = to_model_inputs(batch)
    assert set(inputs) == {"input_ids", "labels", "position_ids", "cu_seq_lens_q",
                           "cu_seq_lens_k", "max_length_q", "max_length_k"}
    assert inputs["cu_seq_lens_q"].tolist() == [0, 3, 5, 9, 10] and inputs["max_length_q"] == 4
    assert inputs["cu_seq_lens_q"].dtype == torch.int32  # what flash_attn_varlen_func takes
