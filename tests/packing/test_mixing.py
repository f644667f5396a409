"""Mixing by tokens: counts that realise token proportions, and realised/measured shares."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.packing import measured_token_shares, realised_token_shares, token_mix_counts

TOKENS = [1_000_000, 4_000_000, 500_000]
SAMPLES = [1_000, 1_000, 5_000]  # mean lengths 1000, 4000, 100


def test_token_epoch_counts_realise_the_token_proportions():
    counts = token_mix_counts(TOKENS, SAMPLES, [0.5, 0.25, 0.25], epoch_tokens=2_000_000)
    assert counts.tolist() == [1000, 125, 5000]
    shares = realised_token_shares(counts, TOKENS, SAMPLES)
    assert np.allclose(shares, [0.5, 0.25, 0.25])


def test_sample_epoch_counts_sum_exactly_and_follow_token_shares():
    counts = token_mix_counts(TOKENS, SAMPLES, [1, 1, 2], epoch_samples=10_001)
    assert counts.sum() == 10_001
    assert np.allclose(realised_token_shares(counts, TOKENS, SAMPLES), [0.25, 0.25, 0.5],
                       atol=1e-3)


@given(
    st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 10**4), st.integers(0, 9)),
             min_size=1, max_size=6).filter(lambda rows: any(p for _, _, p in rows)),
    st.integers(10**5, 10**7),
)
def test_token_shares_are_met_within_one_sample_per_stream(rows, epoch_tokens):
    samples, mean, weights = (np.array(c, dtype=np.int64) for c in zip(*rows))
    tokens = samples * mean
    counts = token_mix_counts(tokens, samples, weights, epoch_tokens=epoch_tokens)
    realised = counts * mean
    target = weights / weights.sum() * epoch_tokens
    assert np.all(np.abs(realised - target) <= mean / 2 + 1e-6)


def test_measured_shares_weight_samples_by_length():
    shares = measured_token_shares([0, 1, 1, 2], [10, 20, 30, 40], 4)
    assert shares.tolist() == [0.1, 0.5, 0.4, 0.0]


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (([1, 2], [1], [1, 1]), {"epoch_tokens": 10},
         "stream_tokens (2) and stream_samples (1) must be non-empty and the same size"),
        (([1, 2], [1, 1], [1, -1]), {"epoch_tokens": 10},
         "proportions must be finite, >= 0 and not all zero"),
        (([1, 0], [1, 0], [1, 1]), {"epoch_tokens": 10}, "streams [1] have a proportion but no"),
        (([1, 2], [1, 1], [0, 0]), {"epoch_samples": 10},
         "proportions must be finite, >= 0 and not all zero"),
        (([1, 2], [1, 1], [1, 1]), {}, "give exactly one of epoch_tokens and epoch_samples"),
        (([1, 2], [1, 1], [1, 1]), {"epoch_tokens": 1, "epoch_samples": 1},
         "give exactly one of epoch_tokens and epoch_samples"),
        (([1, 2], [1, 1], [1]), {"epoch_tokens": 10}, "proportions has 1 entries for 2 streams"),
        (([-1, 2], [1, 1], [1, 1]), {"epoch_tokens": 10},
         "stream token and sample counts must be >= 0 (tokens need samples)"),
        (([1, 2], [1, 1], [1, 1]), {"epoch_tokens": -1}, "epoch_tokens must be >= 0, got -1"),
        (([1, 2], [1, 1], [1, 1]), {"epoch_samples": -1}, "epoch_samples must be >= 0, got -1"),
    ],
)
def test_bad_mixing_arguments_raise_plan_error(args, kwargs, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        token_mix_counts(*args, **kwargs)


def test_bad_counts_and_stream_ids_are_refused():
    with pytest.raises(PlanError, match=re.escape("counts must be 2 non-negative numbers")):
        realised_token_shares([1, -1], [10, 20], [1, 2])
    with pytest.raises(PlanError, match=re.escape("stream_ids (2) and lengths (1) differ")):
        measured_token_shares([0, 1], [5], 2)
    with pytest.raises(PlanError, match=re.escape("stream ids must lie in [0, 2)")):
        measured_token_shares([0, 2], [5, 5], 2)
