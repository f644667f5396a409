"""Each shuffle is a permutation with the locality it promises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.plan.shuffle import ALGORITHMS, get_shuffle

lengths_st = st.lists(st.integers(0, 60), min_size=1, max_size=12)


def run(algo: str, lengths: list[int], block: int, seed: int = 0):
    bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    values = np.arange(bounds[-1], dtype=np.int64) * 7 + 3
    out = get_shuffle(algo)(values.copy(), bounds, np.random.default_rng(seed), block)
    return values, bounds, out


@given(st.sampled_from(ALGORITHMS), lengths_st, st.integers(1, 100), st.integers(0, 50))
def test_shuffles_are_permutations(algo, lengths, block, seed) -> None:
    values, _, out = run(algo, lengths, block, seed)
    assert np.array_equal(np.sort(out), values)


@given(lengths_st, st.integers(0, 50))
def test_py1s_keeps_each_shard_contiguous(lengths, seed) -> None:
    _, bounds, out = run("py1s", lengths, 1, seed)
    piece = np.searchsorted(bounds, (out - 3) // 7, side="right")
    changes = np.count_nonzero(np.diff(piece))
    assert changes == max(np.count_nonzero(lengths) - 1, 0)


@given(st.lists(st.integers(1, 400), min_size=1, max_size=12), st.integers(8, 300),
       st.integers(0, 50))
def test_py1e_spreads_each_shard_over_about_one_block(lengths, block, seed) -> None:
    _, bounds, out = run("py1e", lengths, block, seed)
    piece = np.searchsorted(bounds, (out - 3) // 7, side="right")
    bucket = max(1, min(1024, block // 64))
    for p in np.unique(piece):
        where = np.flatnonzero(piece == p)
        span = where.max() - where.min() + 1
        assert span <= 3 * max(lengths[p - 1], block) + 2 * bucket


def test_py1e_mixes_neighbouring_shards() -> None:
    _, bounds, out = run("py1e", [500] * 20, 2000)
    piece = np.searchsorted(bounds, (out - 3) // 7, side="right")
    window = piece[:64]
    assert len(np.unique(window)) >= 2


def test_unknown_algorithm() -> None:
    with pytest.raises(PlanError, match="shuffle_algo 'py3'"):
        get_shuffle("py3")
