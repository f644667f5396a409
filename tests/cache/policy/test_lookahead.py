"""The prefetcher's lookahead: new shards of a reader's sequence and how far the window reaches
(pure)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streaming.cache.policy.lookahead import entry_runs, next_new, previous_runs, window_end


def runs_of(seq: list[int]) -> tuple[np.ndarray, np.ndarray]:
    seq = np.asarray(seq, np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(seq) != 0) + 1]).astype(np.int64)
    return seq[starts], starts


def entries_of(shard: np.ndarray, start: np.ndarray, length: int, gap: int) -> np.ndarray:
    return entry_runs(previous_runs(shard), start, np.append(start[1:], length), gap)


def test_a_shard_is_new_the_first_time_and_again_after_a_long_gap():
    # runs: 0@0 1@2 0@3 2@4 0@20(after a gap of 16 steps since 0's run ended at 4)
    seq = [0, 0, 1, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0]
    shard, start = runs_of(seq)
    assert shard.tolist() == [0, 1, 0, 2, 0]
    assert entries_of(shard, start, len(seq), gap=8).tolist() == [0, 1, 3, 4]
    assert entries_of(shard, start, len(seq), gap=100).tolist() == [0, 1, 3]


def test_the_window_reaches_the_next_block_however_far_it_is():
    # a shuffled block over shards 0-2, then a block over shards 3-5
    rng = np.random.default_rng(0)
    seq = np.concatenate([rng.integers(0, 3, 3000), rng.integers(3, 6, 3000)])
    shard, start = runs_of(seq.tolist())
    entries = entries_of(shard, start, len(seq), gap=2)  # re-entries of 0-2 in the block
    assert set(shard[entries].tolist()) == {0, 1, 2, 3, 4, 5}
    lo = 10
    hi = int(np.searchsorted(start, start[lo] + 64, side="right"))  # 64 samples ahead
    end = window_end(entries, previous_runs(shard), lo, hi, ahead=2)
    # re-entries of shards 0-2 inside the first block do not count: two new shards are reached
    assert set(shard[lo:end].tolist()) == {0, 1, 2, 3, 4}
    assert shard[end - 1] in (3, 4, 5) and end > hi
    assert sorted(shard[next_new(entries, previous_runs(shard), lo, hi, 3)].tolist()) == [3, 4, 5]
    assert window_end(entries, previous_runs(shard), lo, hi, ahead=0) == hi


def test_the_window_never_shrinks_below_the_sample_window():
    shard, start = runs_of([0, 1, 2, 3, 4, 5])
    entries, prev = entries_of(shard, start, 6, gap=10), previous_runs(shard)
    assert window_end(entries, prev, 0, 6, ahead=1) == 6
    assert window_end(entries, prev, 5, 6, ahead=3) == 6  # nothing new after the last run
    assert window_end(entries, prev, 0, 2, ahead=2) == 4


@given(st.lists(st.integers(0, 6), min_size=1, max_size=200), st.integers(0, 50))
def test_entries_are_exactly_the_runs_whose_shard_was_not_read_recently(seq, gap):
    shard, start = runs_of(seq)
    ends = np.append(start[1:], len(seq))
    expect = []
    for i in range(len(shard)):
        before = [k for k in range(i) if shard[k] == shard[i]]
        if not before or start[i] - ends[before[-1]] > gap:
            expect.append(i)
    assert entries_of(shard, start, len(seq), gap=gap).tolist() == expect


@given(st.lists(st.integers(0, 6), min_size=1, max_size=200), st.integers(0, 20),
       st.integers(0, 199), st.integers(1, 40), st.integers(1, 4))
def test_next_new_takes_the_first_entries_whose_shard_was_not_read_since_lo(seq, gap, lo, span,
                                                                          ahead):
    shard, start = runs_of(seq)
    lo = lo % len(shard)
    hi = min(lo + span, len(shard))
    entries = entries_of(shard, start, len(seq), gap)
    expect = [e for e in entries.tolist() if e >= hi and shard[e] not in shard[lo:e]][:ahead]
    got = next_new(entries, previous_runs(shard), lo, hi, ahead).tolist()
    assert got == expect
    assert len(set(shard[got].tolist())) == len(got)  # each shard once
