"""Subset drawing: runs of sampling_granularity, balanced vs fixed, canonical extras."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streaming.plan import PlanConfig, StreamWeights, global_order
from streaming.plan.sampling import canonical_extras, subset_rows


@given(st.integers(1, 500), st.data(), st.integers(1, 20), st.integers(0, 100))
def test_subset_rows_are_distinct_runs(n, data, granularity, seed) -> None:
    k = data.draw(st.integers(0, n))
    rows = subset_rows(n, k, granularity, np.random.default_rng(seed))
    assert len(rows) == k and len(np.unique(rows)) == k
    assert rows.min(initial=0) >= 0 and rows.max(initial=0) < n
    # All but one run are whole aligned runs of `granularity` rows.
    runs, sizes = np.unique(rows // granularity, return_counts=True)
    full = np.minimum(granularity, n - runs * granularity)
    assert (sizes != full).sum() <= 1


@given(st.lists(st.integers(0, 50), min_size=2, max_size=6), st.data())
def test_canonical_extras_split_exactly(sizes_c, data) -> None:
    sizes = np.array(sizes_c)[:, None]
    total = int(sizes.sum())
    remainder = data.draw(st.integers(0, total))
    out = canonical_extras(sizes, np.array([remainder]), 3, data.draw(st.integers(0, 9)))
    assert out.sum() == remainder
    exact = sizes[:, 0] * remainder / max(total, 1)
    assert np.all(out[:, 0] >= np.floor(exact) - 1e-9) and np.all(out[:, 0] <= np.ceil(exact))
    assert np.all(out[:, 0] <= sizes[:, 0])


def _picked(method: str, epoch: int) -> set[int]:
    cfg = PlanConfig(np.array([40, 40, 40]), np.array([3]), weights=(StreamWeights(choose=30),),
                     sampling_method=method, shuffle=True, num_canonical_nodes=2)
    return set(global_order(cfg, epoch).tolist())


def test_balanced_redraws_each_epoch_and_fixed_does_not() -> None:
    assert _picked("fixed", 0) == _picked("fixed", 1) == _picked("fixed", 5)
    assert len({frozenset(_picked("balanced", e)) for e in range(4)}) > 1


def test_granularity_draws_consecutive_runs() -> None:
    cfg = PlanConfig(np.array([1000]), np.array([1]), weights=(StreamWeights(choose=100),),
                     sampling_granularity=10)
    ids = np.sort(global_order(cfg, 0))
    assert len(np.unique(ids // 10)) == 10
