"""Per-stream epoch counts from proportion / repeat / choose, and their error cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.plan import PlanConfig, StreamWeights, parse_epoch_size
from streaming.plan.mixing import stream_targets


def cfg(sizes, counts, **kw) -> PlanConfig:
    return PlanConfig(np.array(sizes), np.array(counts), **kw)


def test_unweighted_uses_every_sample() -> None:
    c = cfg([3, 4, 5], [2, 1])
    assert c.epoch_size == 12
    assert c.samples_per_stream_epoch.tolist() == [7, 5]


def test_epoch_size_strings() -> None:
    assert parse_epoch_size("100k") == 100_000
    assert parse_epoch_size("64M") == 64_000_000
    assert parse_epoch_size("2b") == 2_000_000_000
    assert parse_epoch_size(None) is None
    with pytest.raises(PlanError, match="epoch_size"):
        parse_epoch_size("lots")


@given(st.lists(st.integers(1, 500), min_size=1, max_size=5), st.data())
def test_proportion_counts_are_exact(sizes, data) -> None:
    props = [data.draw(st.floats(0.01, 10)) for _ in sizes]
    epoch = data.draw(st.integers(1, 5000))
    seed = data.draw(st.integers(0, 1000))
    weights = tuple(StreamWeights(proportion=p) for p in props)
    out = stream_targets(np.array(sizes), weights, epoch, seed)
    assert out.sum() == epoch
    exact = np.array(props) / sum(props) * epoch
    assert np.all(out >= np.floor(exact)) and np.all(out <= np.floor(exact) + 1)
    assert np.array_equal(out, stream_targets(np.array(sizes), weights, epoch, seed))


def test_proportion_defaults_epoch_to_total_and_accepts_strings() -> None:
    c = cfg([10, 30], [1, 1], weights=(StreamWeights(proportion=1), StreamWeights(proportion=1)))
    assert c.samples_per_stream_epoch.tolist() == [20, 20]
    c = cfg([10, 30], [1, 1], weights=(StreamWeights(proportion=3), StreamWeights(proportion=1)),
            epoch_size="1k")
    assert c.samples_per_stream_epoch.tolist() == [750, 250]


@given(st.lists(st.integers(0, 300), min_size=1, max_size=4), st.data())
def test_absolute_counts(sizes, data) -> None:
    weights, expected = [], []
    for n in sizes:
        if data.draw(st.booleans()):
            repeat = data.draw(st.sampled_from([0, 0.25, 0.5, 1, 1.5, 3.75]))
            weights.append(StreamWeights(repeat=repeat))
            expected.append(int(np.floor(repeat * n + 1e-9)))
        else:
            choose = data.draw(st.integers(0, 700)) if n else 0
            weights.append(StreamWeights(choose=choose))
            expected.append(choose)
    assert stream_targets(np.array(sizes), tuple(weights), None, 1).tolist() == expected


def test_unset_streams_default_to_repeat_one_with_absolute_weights() -> None:
    c = cfg([10, 20], [1, 1], weights=(StreamWeights(choose=3), StreamWeights()))
    assert c.samples_per_stream_epoch.tolist() == [3, 20]


def test_unweighted_epoch_size_samples_in_proportion_to_size() -> None:
    c = cfg([10, 30], [1, 1], epoch_size=20)
    assert c.samples_per_stream_epoch.tolist() == [5, 15]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weights": (StreamWeights(proportion=1), StreamWeights(repeat=2))}, "mix proportion"),
        ({"weights": (StreamWeights(proportion=1), StreamWeights())}, "mix proportion"),
        ({"weights": (StreamWeights(repeat=2), StreamWeights(choose=3)), "epoch_size": 100},
         "epoch_size cannot"),
        ({"weights": (StreamWeights(repeat=1),)}, "1 entries for 2 streams"),
        ({"weights": (StreamWeights(proportion=0), StreamWeights(proportion=0))}, "all be zero"),
        ({"weights": (StreamWeights(choose=0), StreamWeights(choose=0))}, "no samples"),
        ({"epoch_size": "ten"}, "epoch_size"),
    ],
)
def test_inconsistent_weights(kwargs, match) -> None:
    with pytest.raises(PlanError, match=match):
        cfg([5, 5], [1, 1], **kwargs)


def test_stream_weights_validation() -> None:
    with pytest.raises(PlanError, match="one of proportion/repeat/choose"):
        StreamWeights(proportion=1, repeat=2)
    with pytest.raises(PlanError, match="repeat"):
        StreamWeights(repeat=-1)
    with pytest.raises(PlanError, match="choose"):
        StreamWeights(choose=2.5)
    with pytest.raises(PlanError, match="proportion"):
        StreamWeights(proportion=float("nan"))


def test_empty_stream_cannot_be_weighted_up() -> None:
    with pytest.raises(PlanError, match="stream 1 has no samples"):
        cfg([5, 0], [1, 1], weights=(StreamWeights(choose=2), StreamWeights(choose=3)))
