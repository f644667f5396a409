"""Precomputed plans: per-epoch determinism, coverage, shuffling, and split-piece order."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streaming.packing import pack_lengths, plan_packs
from tests.packing.helpers import as_lists

LENGTHS = np.random.default_rng(3).integers(1, 900, 3000)


def test_plan_is_a_pure_function_of_seed_and_epoch():
    a = as_lists(plan_packs(LENGTHS, 1024, "best_fit", seed=5, epoch=2))
    b = as_lists(plan_packs(LENGTHS, 1024, "best_fit", seed=5, epoch=2))
    c = as_lists(plan_packs(LENGTHS, 1024, "best_fit", seed=5, epoch=3))
    d = as_lists(plan_packs(LENGTHS, 1024, "best_fit", seed=6, epoch=2))
    assert a == b and a != c and a != d


def test_unshuffled_plan_is_pack_lengths():
    expected = as_lists(pack_lengths(LENGTHS, 1024, "window_50"))
    assert as_lists(plan_packs(LENGTHS, 1024, "window_50", shuffle=False)) == expected


@given(st.sampled_from(["first_fit", "window_10", "best_fit", "offline_bfd"]),
       st.integers(0, 2**32), st.integers(0, 50))
def test_every_sample_appears_once_per_epoch(strategy, seed, epoch):
    packs = plan_packs(LENGTHS[:500], 1024, strategy, seed=seed, epoch=epoch)
    flat = np.sort(np.concatenate(packs))
    assert np.array_equal(flat, np.arange(500))
    assert max(int(LENGTHS[p].sum()) for p in packs) <= 1024


def test_offline_bfd_is_at_least_as_tight_as_streaming_best_fit():
    offline = len(plan_packs(LENGTHS, 1024, "offline_bfd", shuffle=False))
    streaming = len(plan_packs(LENGTHS, 1024, "best_fit", shuffle=False))
    assert offline <= streaming
    assert offline >= int(np.ceil(LENGTHS.sum() / 1024))


@given(st.integers(0, 1000))
def test_shuffled_split_pieces_stay_in_token_order(seed):
    lengths = np.array([25, 3, 40, 7, 9, 31, 2])
    packs = plan_packs(lengths, 10, "best_fit", seed=seed, filter_overlong=False,
                       overlong="split", buffer_size=3)
    seen = Counter(i for p in packs for i in p.tolist())
    assert [seen[i] for i in range(lengths.size)] == [-(-n // 10) for n in lengths.tolist()]
    for sample in (0, 2, 5):
        holders = [p.tolist() for p in packs if sample in p.tolist()]
        # full single-sample pieces come before the pack that holds the remainder
        first_shared = next((k for k, h in enumerate(holders) if h != [sample]), len(holders))
        assert all(h == [sample] for h in holders[:first_shared])
        assert first_shared >= len(holders) - 1
