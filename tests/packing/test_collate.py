"""Collator: flash-attention varlen tensors stay mutually consistent, with and without padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.packing.collate import PackCollator


def test_one_pack_without_padding():
    out = PackCollator(8).pack([np.array([11, 12, 13]), np.array([14, 15])])
    assert out["input_ids"].tolist() == [11, 12, 13, 14, 15]
    assert out["labels"].tolist() == [-100, 12, 13, -100, 15]
    assert out["position_ids"].tolist() == [0, 1, 2, 0, 1]
    assert out["cu_seqlens"].tolist() == [0, 3, 5] and out["cu_seqlens"].dtype == torch.int32
    assert out["seq_lens"].tolist() == [3, 2] and out["max_seqlen"] == 3


def test_padding_is_its_own_segment_with_ignored_labels():
    collator = PackCollator(8, pad=True, pad_id=7, mask_first_label=False)
    out = collator.pack([[11, 12, 13], [14, 15]])
    assert out["input_ids"].tolist() == [11, 12, 13, 14, 15, 7, 7, 7]
    assert out["labels"].tolist() == [11, 12, 13, 14, 15, -100, -100, -100]
    assert out["position_ids"].tolist() == [0, 1, 2, 0, 1, 0, 1, 2]
    assert out["cu_seqlens"].tolist() == [0, 3, 5, 8]
    assert out["seq_is_pad"].tolist() == [False, False, True]
    stats = collator.stats(out)
    assert (stats.packs, stats.sequences, stats.tokens, stats.fill_rate) == (1, 2, 5, 5 / 8)


def test_batch_offsets_cu_seqlens_over_the_flattened_rows():
    out = PackCollator(6).batch([[[1, 2, 3], [4]], [[5, 6, 7, 8, 9]]])
    assert out["input_ids"].shape == (2, 5)  # no pad: width of the longest pack
    assert out["cu_seqlens"].tolist() == [0, 3, 4, 5, 10]
    assert out["seq_is_pad"].tolist() == [False, False, True, False]
    assert out["pack_lengths"].tolist() == [4, 5]
    stats = PackCollator(6).stats(out)
    assert (stats.min_length, stats.max_length, stats.mean_length) == (4, 5, 4.5)
    assert stats.fill_rate == pytest.approx(9 / 12)


def test_zero_length_sequences_are_dropped_and_empty_batches_refused():
    out = PackCollator(4).pack([[], [1, 2], []])
    assert out["cu_seqlens"].tolist() == [0, 2]
    with pytest.raises(PlanError):
        PackCollator(4).batch([])


packs_st = st.lists(
    st.lists(st.lists(st.integers(0, 50_000), max_size=12), max_size=5), min_size=1, max_size=4
)


@given(packs_st, st.booleans(), st.booleans())
def test_collated_tensors_agree_with_each_other(packs, pad, mask_first):
    collator = PackCollator(24, pad=pad, pad_id=3, mask_first_label=mask_first)
    out = collator.batch(packs)
    rows, width = out["input_ids"].shape
    assert rows == len(packs) and (not pad or width >= 24)
    cu = out["cu_seqlens"].numpy().astype(np.int64)
    lens = out["seq_lens"].numpy()
    assert cu[0] == 0 and cu[-1] == rows * width and np.array_equal(np.diff(cu), lens)
    assert out["max_seqlen"] == lens.max()
    flat_ids = out["input_ids"].reshape(-1).numpy()
    flat_pos = out["position_ids"].reshape(-1).numpy()
    flat_lab = out["labels"].reshape(-1).numpy()
    real = [s for pack in packs for s in pack if s]
    pieces = [flat_ids[a:b].tolist() for a, b, p in
              zip(cu[:-1], cu[1:], out["seq_is_pad"].tolist()) if not p]
    assert pieces == real
    for a, b, is_pad in zip(cu[:-1], cu[1:], out["seq_is_pad"].tolist()):
        assert flat_pos[a:b].tolist() == list(range(b - a))
        if is_pad:
            assert (flat_lab[a:b] == -100).all() and (flat_ids[a:b] == 3).all()
        else:
            assert flat_lab[a] == (-100 if mask_first else flat_ids[a])
            assert np.array_equal(flat_lab[a + 1 : b], flat_ids[a + 1 : b])
        assert (b - a) <= width and a // width == (b - 1) // width  # never spans two rows
