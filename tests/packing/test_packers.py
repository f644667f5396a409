"""Streaming packers: hand-made behaviour, invariants, planner equivalence and resumption."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError, StateMismatchError
from streaming.packing import BestFitPacker, make_packer, pack_lengths
from tests.packing.helpers import as_lists, packing_cases, push_one_by_one

LENGTHS = [4, 5, 3, 6, 2, 8, 1]


def test_first_fit_closes_the_open_pack_when_the_next_sample_does_not_fit():
    packer = make_packer("first_fit", 10)
    emitted = [as_lists(packer.push(i, n)) for i, n in enumerate(LENGTHS)]
    assert emitted == [[], [], [[0, 1]], [], [[2, 3]], [], [[4, 5]]]
    assert as_lists(packer.flush()) == [[6]]


def test_window_sorts_each_window_and_packs_first_fit_decreasing_without_carry_over():
    packer = make_packer("window_4", 10)
    emitted = [as_lists(packer.push(i, n)) for i, n in enumerate(LENGTHS)]
    # window [4,5,3,6]: 6->A, 5->B, 4->A (full), 3->B; ids inside a pack keep arrival order
    assert emitted == [[], [], [], [[0, 3], [1, 2]], [], [], []]
    # last, partial window at flush: 8->A, 2->A (full), 1->B; nothing joined the earlier packs
    assert as_lists(packer.flush()) == [[4, 5], [6]]


def test_best_fit_uses_the_tightest_pack_and_carries_the_emptiest():
    packer = BestFitPacker(10, buffer_size=4, carry=1)
    emitted = [as_lists(packer.push(i, n)) for i, n in enumerate(LENGTHS)]
    # buffer [4,5,3,6]: 6->A, 5->B, 4->A (room 4: tightest, now full), 3->B (room 2, carried)
    assert emitted == [[], [], [], [[0, 3]], [], [], []]
    # flush: 8->C (room 2), 2 ties between B and C (room 2): the older pack B wins, 1->C
    assert as_lists(packer.flush()) == [[1, 2, 4], [5, 6]]


def test_best_fit_emits_later_packs_while_an_older_one_stays_open():
    packer = BestFitPacker(4, buffer_size=2, carry=1)
    assert as_lists(packer.push_many([0, 1], [1, 1])) == []  # pack A = [0, 1], room 2, carried
    # next buffer: 4 opens pack B (full, emitted); 1 goes to A, which stays open ahead of B
    assert as_lists(packer.push_many([2, 3], [4, 1])) == [[2]]
    assert packer.state_dict()["open_ids"] == [[0, 1, 3]]
    assert as_lists(packer.flush()) == [[0, 1, 3]]


def test_best_fit_emits_packs_carried_longer_than_max_age():
    # every pack has the same room and nothing fits it: without the age limit the two oldest
    # packs would be carried until flush
    packer = BestFitPacker(4096, buffer_size=10, carry=2, max_age=2)
    emitted: set[int] = set()
    for i in range(500):
        for pack in packer.push(i, 3000):
            emitted.update(pack.tolist())
    assert set(range(500 - 3 * 10)) <= emitted  # kept twice at most, emitted by the third


def test_best_fit_beats_first_fit_on_a_skewed_stream():
    rng = np.random.default_rng(0)
    lengths = np.minimum(rng.lognormal(np.log(600), 1.0, 20_000).astype(np.int64) + 1, 4096)
    counts = {s: len(pack_lengths(lengths, 4096, s)) for s in ("first_fit", "best_fit")}
    ceiling = len(pack_lengths(lengths, 4096, "offline_bfd"))
    assert counts["best_fit"] <= 1.005 * ceiling < counts["first_fit"]


@given(packing_cases())
def test_every_sample_is_packed_exactly_once_and_no_pack_overflows(case):
    capacity, lengths, strategy, options = case
    packs = pack_lengths(lengths, capacity, strategy, **options)
    lengths = np.asarray(lengths, dtype=np.int64)
    seen = Counter(i for p in packs for i in p.tolist())
    for i, n in enumerate(lengths.tolist()):
        if n <= capacity:
            expected = 1
        elif options["filter_overlong"]:
            expected = 0
        elif options["overlong"] == "alone":
            expected = 1
        else:
            expected = -(-n // capacity)
        assert seen.get(i, 0) == expected, (i, n)
    assert set(seen) <= set(range(len(lengths)))
    for pack in packs:
        assert pack.size > 0 and pack.dtype == np.int64
        if pack.size == 1 and lengths[pack[0]] > capacity:
            continue  # an overlong sample alone, or one full piece of a split sample
        # a split sample contributes only its remainder to a shared pack
        tokens = [int(n) if n <= capacity else int(n) % capacity for n in lengths[pack]]
        assert sum(tokens) <= capacity


@given(packing_cases())
def test_pack_lengths_equals_the_streaming_packer(case):
    capacity, lengths, strategy, options = case
    expected = as_lists(push_one_by_one(strategy, capacity, lengths, **options))
    assert as_lists(pack_lengths(lengths, capacity, strategy, **options)) == expected


@given(packing_cases(), st.data())
def test_resume_from_state_mid_way_continues_identically(case, data):
    capacity, lengths, strategy, options = case
    expected = as_lists(push_one_by_one(strategy, capacity, lengths, **options))
    cut = data.draw(st.integers(0, len(lengths)))
    first = make_packer(strategy, capacity, **options)
    out = first.push_many(np.arange(cut), lengths[:cut])
    state = first.state_dict()
    second = make_packer(strategy, capacity, **options)
    second.load_state_dict(state)
    for i in range(cut, len(lengths)):
        out += second.push(i, lengths[i])
    assert as_lists(out + second.flush()) == expected


@given(packing_cases(max_size=60))
def test_state_is_plain_data(case):
    capacity, lengths, strategy, options = case
    packer = make_packer(strategy, capacity, **options)
    packer.push_many(np.arange(len(lengths)), lengths)

    def plain(value):
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        if isinstance(value, list):
            return all(plain(v) for v in value)
        return isinstance(value, (int, str, bool)) or value is None

    assert plain(packer.state_dict())


def test_packing_is_deterministic_and_ties_follow_position():
    lengths = [3] * 12 + [5, 5, 2, 2]
    for strategy in ("first_fit", "window_5", "best_fit"):
        runs = [as_lists(pack_lengths(lengths, 8, strategy, buffer_size=6)) for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]
    assert as_lists(pack_lengths([3, 3, 3], 6, "window_3")) == [[0, 1], [2]]


def test_split_emits_full_pieces_at_push_and_packs_the_remainder():
    packer = make_packer("first_fit", 10, filter_overlong=False, overlong="split")
    assert as_lists(packer.push(7, 3)) == []
    assert as_lists(packer.push(8, 25)) == [[8], [8]]  # two full pieces now, remainder 5 packed
    assert as_lists(packer.flush()) == [[7, 8]]
    alone = make_packer("first_fit", 10, filter_overlong=False, overlong="alone")
    assert as_lists(alone.push(8, 25)) == [[8]]
    dropping = make_packer("best_fit", 10)
    assert dropping.push(8, 25) == [] and dropping.dropped == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"strategy": "worst_fit"},
        {"strategy": "window_"},
        {"strategy": "window_0"},
        {"packing_length": 0},
        {"overlong": "truncate"},
        {"buffer_size": 0},
    ],
)
def test_bad_arguments_raise_plan_error(kwargs):
    args = {"strategy": "best_fit", "packing_length": 16, **kwargs}
    with pytest.raises(PlanError):
        make_packer(args.pop("strategy"), args.pop("packing_length"), **args)


def test_bad_lengths_raise_plan_error():
    with pytest.raises(PlanError, match="non-negative"):
        pack_lengths([3, -1], 8)
    with pytest.raises(PlanError, match="integers"):
        pack_lengths([1.5], 8)
    with pytest.raises(PlanError, match="negative length"):
        make_packer("first_fit", 8).push(0, -2)


def test_state_from_another_configuration_is_refused():
    state = make_packer("best_fit", 16, buffer_size=4).state_dict()
    with pytest.raises(StateMismatchError, match="buffer_size"):
        make_packer("best_fit", 16, buffer_size=8).load_state_dict(state)
    with pytest.raises(StateMismatchError, match="strategy"):
        make_packer("first_fit", 16).load_state_dict(state)
    bad = {**make_packer("window_4", 16).state_dict(), "pending_ids": [1, 2, 3, 4, 5],
           "pending_lengths": [1, 1, 1, 1, 1]}
    with pytest.raises(StateMismatchError, match="window"):
        make_packer("window_4", 16).load_state_dict(bad)


def test_planner_modules_do_not_import_torch():
    code = (
        "import sys, streaming.packing, streaming.packing.pack_planner, "
        "streaming.dataset.token_mix;"
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@given(
    st.lists(st.integers(0, 32), max_size=150),
    st.integers(1, 12),
    st.integers(0, 6),
    st.integers(1, 4),
    st.data(),
)
def test_best_fit_knobs_keep_bulk_stream_and_resume_identical(lengths, buffer, carry, age, data):
    def packer():
        return BestFitPacker(32, buffer_size=buffer, carry=carry, max_age=age)

    one = packer()
    expected = [p.tolist() for i, n in enumerate(lengths) for p in one.push(i, n)]
    expected += as_lists(one.flush())
    bulk = packer()
    assert as_lists(bulk.push_many(np.arange(len(lengths)), lengths) + bulk.flush()) == expected
    cut = data.draw(st.integers(0, len(lengths)))
    first = packer()
    out = first.push_many(np.arange(cut), lengths[:cut])
    second = packer()
    second.load_state_dict(first.state_dict())
    out += second.push_many(np.arange(cut, len(lengths)), lengths[cut:]) + second.flush()
    assert as_lists(out) == expected
    assert sorted(i for p in expected for i in p) == list(range(len(lengths)))
