"""Belady victim choice and next-use distances (pure)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streaming.cache.policy.eviction import NEVER, choose_victims, next_use, worth_bringing


def test_next_use_takes_the_nearest_reader_and_forgets_finished_runs():
    # reader 0 at step 10: shard 3 in use (9..12), shard 5 from 13, shard 1 finished at 9
    # reader 1 at step 4: shard 5 from 6 (nearer for reader 1: 2 steps), shard 2 from 20
    shards = np.array([[1, 3, 5], [5, 2, -1]])
    starts = np.array([[0, 9, 13], [6, 20, 0]])
    ends = np.array([[9, 12, 30], [8, 25, 0]])
    dist = next_use(shards, starts, ends, np.array([10, 4]), 7)
    assert dist.tolist() == [NEVER, NEVER, 16, 0, NEVER, 2, NEVER]


def test_farthest_first_then_biggest():
    dist = np.array([5, 100, 100, 7, NEVER])
    sizes = np.array([10, 10, 30, 10, 5])
    evictable = np.array([True, True, True, True, True])
    victims = choose_victims(40, 0, sizes=sizes, evictable=evictable, distance=dist)
    assert victims.tolist() == [4, 2, 1]  # 5 + 30 + 10 >= 40


def test_no_eviction_when_it_fits_and_none_when_it_cannot():
    sizes = np.array([10, 10])
    ok = np.array([True, False])
    dist = np.array([1, 1])
    assert choose_victims(5, 5, sizes=sizes, evictable=ok, distance=dist).size == 0
    assert choose_victims(30, 5, sizes=sizes, evictable=ok, distance=dist) is None


def test_a_prefetch_evicts_only_shards_no_reader_needs_again():
    sizes = np.array([10, 10, 10, 10])
    dist = np.array([2, 8, 50, NEVER])
    ok = np.ones(4, bool)
    assert choose_victims(10, 0, sizes=sizes, evictable=ok, distance=dist,
                          farther_than=8).tolist() == [3]
    # shard 2 is needed after the prefetched shard's use, but needed: fetching on demand
    # might find the room freed by then, so the prefetch waits rather than evict it
    assert choose_victims(20, 0, sizes=sizes, evictable=ok, distance=dist,
                          farther_than=8) is None
    # a reader that needs a shard now evicts the farthest ones
    assert choose_victims(20, 0, sizes=sizes, evictable=ok, distance=dist).tolist() == [3, 2]
    assert choose_victims(30, 0, sizes=sizes, evictable=ok, distance=dist,
                          farther_than=0).tolist() == [3, 2, 1]


def test_a_prefetch_is_worth_it_only_beside_the_shards_needed_sooner():
    dist = np.array([0, 5, 10, 20, NEVER, 3])
    sizes = np.array([100, 100, 100, 100, 100, 100])
    wanted = np.array([True, True, True, True, True, False])  # shard 5 is only local
    # shard 3 (needed in 20) beside 0, 1, 2 (sooner): 400 bytes
    assert worth_bringing(3, 20, 100, distance=dist, sizes=sizes, wanted=wanted, room=400)
    assert not worth_bringing(3, 20, 100, distance=dist, sizes=sizes, wanted=wanted, room=399)
    # the compressed copies of preparations under way take their room too
    assert not worth_bringing(3, 20, 100, distance=dist, sizes=sizes, wanted=wanted, room=400,
                              in_flight=1)
    # its own entry and shards needed later or never do not count
    assert worth_bringing(1, 5, 150, distance=dist, sizes=sizes, wanted=wanted, room=250)
    assert worth_bringing(4, NEVER, 100, distance=dist, sizes=np.zeros(6, np.int64),
                          wanted=wanted, room=100)


@given(
    st.lists(st.tuples(st.integers(1, 100), st.one_of(st.integers(0, 50), st.just(int(NEVER))),
                       st.booleans()),
             min_size=1, max_size=30),
    st.integers(0, 2000), st.integers(0, 200), st.integers(-1, 50),
)
def test_victims_are_a_minimal_farthest_prefix(items, need, free, farther):
    sizes = np.array([s for s, _, _ in items])
    dist = np.array([d for _, d, _ in items])
    ok = np.array([e for _, _, e in items])
    victims = choose_victims(need, free, sizes=sizes, evictable=ok, distance=dist,
                             farther_than=farther)
    qualifying = ok & ((dist == NEVER) if farther > 0 else (dist > farther))
    if free >= need:
        assert victims.size == 0
        return
    if free + sizes[qualifying].sum() < need:
        assert victims is None
        return
    assert victims is not None and len(set(victims.tolist())) == len(victims)
    assert qualifying[victims].all()
    assert free + sizes[victims].sum() >= need
    assert free + sizes[victims[:-1]].sum() < need  # no more than needed
    rest = np.setdiff1d(np.flatnonzero(qualifying), victims)
    if len(rest):
        assert dist[rest].max() <= dist[victims].min()  # farthest next use went first
