"""Minimum cache_limit of a plan: exact on small cases, sufficient and necessary in a lock-step
simulation that uses the real victim choice, refused below with the number."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.cache.policy.eviction import NEVER, choose_victims
from streaming.cache.policy.minimum_limit import (
    Footprint,
    check_limit,
    minimum_limit,
    reader_shards,
)
from streaming.errors import CacheLimitError
from streaming.plan import PlanConfig, World, plan_node


def _footprint(raw, zipped=None, keep=False, cached=True):
    raw = np.asarray(raw)
    zipped = np.zeros_like(raw) if zipped is None else np.asarray(zipped)
    return Footprint.of(raw, zipped, np.full(len(raw), keep), np.full(len(raw), cached))


def test_footprint_counts_kept_zips_as_resident_and_skips_local_only():
    fp = Footprint.of(np.array([100, 100, 100]), np.array([40, 40, 0]),
                      np.array([False, True, False]), np.array([True, True, False]), slack=1)
    assert fp.resident.tolist() == [100, 140, 0]
    assert fp.transient.tolist() == [41, 1, 0]
    assert fp.download_cost(0) == 141


def test_zipless_shards_reserve_no_room_for_a_compressed_copy():
    fp = Footprint.of(np.array([100, 100, 100]), np.array([40, 40, 40]),
                      np.array([False, True, False]), np.array([True, True, True]), slack=1,
                      zipless=np.array([True, False, False]))
    assert fp.resident.tolist() == [100, 140, 100]
    assert fp.transient.tolist() == [1, 1, 41]  # decompressed on the way in: only the lock


def test_minimum_is_the_worst_step_plus_one_decompression():
    fp = _footprint([10, 20, 30, 40], [5, 6, 7, 50])
    shards = np.array([[0, 0, 1, 3, -1],
                       [1, 2, 2, 3, 3]])
    m = minimum_limit(shards, fp)
    # step 2: {1, 2} -> 20 + 30 + max(6, 7) = 57; step 3: {3} -> 40 + 50 = 90
    assert (m.bytes, m.step, m.shards) == (90, 3, (3,))


def test_reader_shards_keeps_padding():
    starts = np.array([0, 3, 5])
    assert reader_shards(np.array([[0, 2, 3, 6, -1]]), starts).tolist() == [[0, 0, 1, 2, -1]]


def test_check_limit_message_states_the_minimum_and_the_given_limit():
    m = minimum_limit(np.array([[0, 1]]), _footprint([1000, 3000]))
    check_limit(3000, m)
    with pytest.raises(CacheLimitError) as err:
        check_limit(2999, m, other_bytes=10, where="/cache")
    text = str(err.value)
    assert "3010" in text and "2999" in text and "/cache" in text


def simulate(shards: np.ndarray, fp: Footprint, limit: int) -> int:
    """Run readers in lock-step under `limit` with demand fetching and Belady eviction.

    Returns the peak bytes used; raises AssertionError on exceeding the limit and RuntimeError
    on a deadlock (a reader cannot get room although every other reader holds what it needs).
    """
    readers, steps = shards.shape
    resident = np.zeros(len(fp.resident), bool)
    used = peak = 0
    for t in range(steps):
        pinned = np.zeros(len(resident), bool)
        future = shards[:, t:]
        for r in range(readers):
            s = int(shards[r, t])
            if s < 0:
                continue
            if not resident[s]:
                dist = np.full(len(resident), NEVER, np.int64)
                for row in future:
                    hit = np.flatnonzero(row >= 0)
                    for k in hit[::-1]:
                        dist[row[k]] = min(dist[row[k]], k)
                cost = fp.download_cost(s)
                victims = choose_victims(cost, limit - used, sizes=fp.resident,
                                         evictable=resident & ~pinned, distance=dist)
                if victims is None:
                    raise RuntimeError(f"deadlock at step {t} reader {r}")
                resident[victims] = False
                used -= int(fp.resident[victims].sum())
                assert used + cost <= limit
                peak = max(peak, used + cost)
                resident[s] = True
                used += int(fp.resident[s])
            pinned[s] = True
            assert used <= limit
    return peak


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 12), st.integers(2, 9), st.integers(0, 2**31),
       st.booleans())
def test_simulation_runs_at_the_minimum_and_not_below(readers, steps, num_shards, seed, keep):
    rng = np.random.default_rng(seed)
    raw = rng.integers(1, 100, num_shards)
    fp = _footprint(raw, rng.integers(0, 80, num_shards), keep=keep)
    shards = rng.integers(-1, num_shards, (readers, steps))
    m = minimum_limit(shards, fp)
    assert simulate(shards, fp, m.bytes) <= m.bytes
    if m.bytes:
        with pytest.raises(CacheLimitError):
            check_limit(m.bytes - 1, m)
        # The bound is tight up to one decompression: below the resident bytes of the worst
        # step, no schedule can run.
        bare = minimum_limit(shards, Footprint(fp.resident, np.zeros_like(fp.transient)))
        assert m.bytes - bare.bytes <= fp.transient.max()
        with pytest.raises((RuntimeError, AssertionError)):
            simulate(shards, fp, bare.bytes - 1)


def test_real_node_plan_with_shuffle_runs_at_its_minimum():
    samples = np.full(40, 25)
    cfg = PlanConfig(samples_per_shard=samples, shards_per_stream=np.array([40]),
                     shuffle=True, shuffle_algo="py1e", shuffle_seed=3, batch_size=4,
                     num_canonical_nodes=1)
    plan = plan_node(cfg, World(1, 2, 2, 0, 0, 0, 1), epoch=0)
    starts = np.concatenate([[0], np.cumsum(samples)[:-1]])
    shards = reader_shards(plan.ids, starts).reshape(4, -1)
    raw = np.random.default_rng(0).integers(1000, 2000, 40)
    fp = _footprint(raw, raw // 2)
    m = minimum_limit(shards, fp)
    assert m.bytes <= 4 * raw.max() + raw.max() // 2
    simulate(shards, fp, m.bytes)


def test_ids_are_mapped_per_block_with_the_same_result(monkeypatch):
    import streaming.cache.policy.minimum_limit as limit_module

    monkeypatch.setattr(limit_module, "CHUNK", 7)
    rng = np.random.default_rng(5)
    starts = np.array([0, 10, 25, 40, 41])
    ids = rng.integers(-1, 60, (3, 50))
    fp = _footprint(rng.integers(1, 100, 5), rng.integers(1, 50, 5))
    by_ids = minimum_limit(ids, fp, starts)
    assert by_ids == minimum_limit(reader_shards(ids, starts), fp)
