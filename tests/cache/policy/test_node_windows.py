"""The node's readers placed together (NodeWindows) are where each reader placed alone is: the
same current run, the same prefetch window as `lookahead.prefetch_window`, the same shards to
bring and the same nearest one, at every step the simulation visits."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.cache.policy.lookahead import ReaderRuns, prefetch_window
from streaming.cache.policy.simulated_windows import NodeWindows

AHEAD = 4


@st.composite
def readers(draw) -> tuple[list[np.ndarray], int, int]:
    shards = draw(st.integers(1, 12))
    seqs = [np.array(draw(st.lists(st.integers(0, shards - 1), max_size=60)), np.int64)
            for _ in range(draw(st.integers(1, 6)))]
    return seqs, shards, draw(st.integers(1, 20))


@settings(max_examples=150, deadline=None)
@given(readers(), st.data())
def test_every_reader_is_where_it_would_be_alone(case, data):
    seqs, shards, predownload = case
    runs = [ReaderRuns.of(s, predownload) for s in seqs]
    windows = NodeWindows(runs, predownload, AHEAD)
    longest = max(len(s) for s in seqs)
    steps = sorted(set(data.draw(st.lists(st.integers(0, longest + 3), max_size=25))))
    for t in steps:  # steps only move forward, as in the simulation
        windows.at(t)
        wanted = np.array(data.draw(st.lists(st.booleans(), min_size=shards, max_size=shards)))
        expect_shard, expect_distance, expect_owner, current = [], [], [], []
        for i, r in enumerate(runs):
            if t >= r.length:
                current.append(-1)
                continue
            lo, hi = prefetch_window(r.start, r.entries, r.previous, t, predownload, AHEAD)
            current.append(int(r.shard[lo]))
            for k in range(lo, hi):
                if wanted[r.shard[k]]:
                    expect_shard.append(int(r.shard[k]))
                    expect_distance.append(max(int(r.start[k]) - t, 0))
                    expect_owner.append(i)
        assert windows.current().tolist() == current
        shard, distance, owner = windows.candidates(t, wanted)
        assert shard.tolist() == expect_shard
        assert distance.tolist() == expect_distance
        assert owner.tolist() == expect_owner
        nearest = windows.nearest(t, wanted)
        if nearest is not None:  # None: the lookups would cost more than the windows
            firsts = {}
            for o, sh, d in zip(expect_owner, expect_shard, expect_distance):
                firsts.setdefault(o, (sh, d))
            assert [(int(o), (int(sh), int(d))) for sh, d, o in zip(*nearest)] == \
                sorted(firsts.items())


def test_a_window_whose_next_new_shards_are_far_away_still_reaches_them():
    """Past the window, hundreds of runs come back to shards the window already has before the
    next new ones: the reader scans on alone, as `prefetch_window` does."""
    back_and_forth = np.repeat(np.arange(400) % 2, 2)
    seqs = [np.concatenate([back_and_forth, np.repeat(np.arange(2, 10), 3)]),
            np.repeat(np.arange(30) % 7, 5)]
    runs = [ReaderRuns.of(s, 1) for s in seqs]
    windows = NodeWindows(runs, 1, AHEAD)
    for t in range(0, 830, 7):
        windows.at(t)
        for i, r in enumerate(runs):
            if t < r.length:
                lo, hi = prefetch_window(r.start, r.entries, r.previous, t, 1, AHEAD)
                assert (int(windows.lo[i]), int(windows.end[i])) == (lo, hi), (t, i)


@settings(max_examples=150, deadline=None)
@given(readers(), st.data(), st.sampled_from([1, 7, 1 << 14]))
def test_walking_through_steps_places_the_readers_as_placing_them_one_step_at_a_time(
        case, data, placements):
    """`walk` computes many steps' placements at once (`placements` of them per chunk here,
    so that chunks end mid-way); each must be what `at` gives at that step."""
    from streaming.cache.policy import simulated_windows as node_windows

    seqs, _, predownload = case
    runs = [ReaderRuns.of(s, predownload) for s in seqs]
    longest = max(len(s) for s in seqs)
    steps = np.array(sorted(set(data.draw(st.lists(st.integers(0, longest + 3), max_size=40)))),
                     np.int64)
    one_by_one = NodeWindows(runs, predownload, AHEAD)
    together = NodeWindows(runs, predownload, AHEAD)
    before = node_windows.PLACEMENTS
    node_windows.PLACEMENTS = placements * len(runs)
    try:
        for t in together.walk(steps):
            one_by_one.at(t)
            for name in ("active", "lo", "hi", "end"):
                assert getattr(together, name).tolist() == getattr(one_by_one, name).tolist(), \
                    (t, name)
    finally:
        node_windows.PLACEMENTS = before
