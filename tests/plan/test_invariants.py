"""Property tests of the epoch plan: coverage, mixing, determinism, elasticity, resumption."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.plan import PlanConfig, World, global_order, plan_node, plan_worker
from streaming.plan.order import EpochOrder
from streaming.plan.planner import deal_batches
from tests.plan.helpers import (
    ALGOS,
    assemble,
    has_samples,
    node_plans,
    shuffle_kwargs,
    streams,
    weights_for,
    worlds,
)

METHODS = ("random", "stratified", "per_stream", "device_per_stream")


@st.composite
def setups(draw, weighted: bool = False, method: str | None = None):
    sizes, counts = draw(streams())
    world = draw(worlds())
    kwargs = shuffle_kwargs(draw)
    if draw(st.booleans()):
        kwargs["num_canonical_nodes"] = world.num_groups * draw(st.integers(1, 3))
    weights = draw(weights_for(len(counts))) if weighted else ()
    batching = method or draw(st.sampled_from(METHODS))
    batch = draw(st.integers(1, 4))
    if batching == "random" and world.workers_per_rank == 1 and draw(st.booleans()):
        batch = None  # a mid-epoch resume with several workers needs batch_size
    assume(has_samples(sizes, counts, weights))
    cfg = PlanConfig(sizes, counts, weights=weights, batch_size=batch, batching_method=batching,
                     sampling_granularity=draw(st.sampled_from([1, 1, 3])), **kwargs)
    epoch = draw(st.integers(0, 3))
    if batching != "random":  # a stream too small for one batch is refused, as the reference
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                global_order(cfg, epoch, world)
        except PlanError:
            assume(False)
    return cfg, world, epoch


def stream_of(cfg: PlanConfig, ids: np.ndarray) -> np.ndarray:
    return np.searchsorted(cfg.stream_offsets, ids, side="right") - 1


@given(setups())
def test_every_sample_exactly_once_and_plans_match_global_order(setup) -> None:
    cfg, world, epoch = setup
    ids, pad = global_order(cfg, epoch, world, with_padding=True)
    real = np.sort(ids[~pad])
    if cfg.batching_method == "random":  # every sample; the others drop partial batches
        assert np.array_equal(real, np.arange(cfg.epoch_size))
        assert len(ids) % world.data_parallel_ranks == 0
        if world.data_parallel_ranks == 1:
            assert not pad.any()
    else:
        assert len(np.unique(real)) == len(real) and np.all(real < cfg.epoch_size)
        assert len(ids) % (cfg.device_batch() * world.data_parallel_ranks) == 0
    assert np.array_equal(assemble(cfg, world, epoch), ids)


@given(setups(weighted=True, method="random"))
def test_per_stream_counts_match_weights(setup) -> None:
    cfg, world, epoch = setup
    ids, pad = global_order(cfg, epoch, world, with_padding=True)
    real = ids[~pad]
    per_stream = np.bincount(stream_of(cfg, real), minlength=cfg.num_streams)
    assert np.array_equal(per_stream, cfg.samples_per_stream_epoch)
    # Up-sampling takes whole copies plus a subset: every sample of a stream appears k or k+1
    # times, k = target // stream size.
    seen = np.bincount(real, minlength=int(cfg.stream_offsets[-1]))
    for s in range(cfg.num_streams):
        lo, hi = cfg.stream_offsets[s], cfg.stream_offsets[s + 1]
        if hi > lo:
            k = cfg.samples_per_stream_epoch[s] // (hi - lo)
            assert set(np.unique(seen[lo:hi]).tolist()) <= {int(k), int(k) + 1}


@given(setups(weighted=True))
def test_deterministic_for_a_fixed_seed(setup) -> None:
    cfg, world, epoch = setup
    again = PlanConfig(cfg.samples_per_shard.copy(), cfg.shards_per_stream.copy(),
                       weights=cfg.weights, batch_size=cfg.batch_size, shuffle=cfg.shuffle,
                       shuffle_algo=cfg.shuffle_algo, shuffle_seed=cfg.shuffle_seed,
                       shuffle_block_size=cfg.shuffle_block_size,
                       num_canonical_nodes=cfg.num_canonical_nodes,
                       batching_method=cfg.batching_method,
                       sampling_granularity=cfg.sampling_granularity)
    assert again.fingerprint() == cfg.fingerprint()
    for a, b in zip(node_plans(cfg, world, epoch), node_plans(again, world, epoch)):
        assert np.array_equal(a.ids, b.ids)


@given(streams(max_shards=6, max_size=40), st.sampled_from(ALGOS), st.integers(0, 1000),
       st.integers(1, 2))
def test_epochs_differ_when_shuffling(data, algo, seed, canonical) -> None:
    sizes, counts = data
    assume(sizes.sum() >= 30)
    cfg = PlanConfig(sizes, counts, shuffle=True, shuffle_algo=algo, shuffle_seed=seed,
                     shuffle_block_size=8, num_canonical_nodes=canonical)
    orders = [global_order(cfg, e) for e in range(3)]
    assert not np.array_equal(orders[0], orders[1]) or not np.array_equal(orders[1], orders[2])


def test_no_shuffle_keeps_storage_order() -> None:
    cfg = PlanConfig(np.array([3, 4, 5]), np.array([2, 1]))
    assert np.array_equal(global_order(cfg, 0), np.arange(12))
    assert np.array_equal(global_order(cfg, 3), np.arange(12))


def _shards(cfg: PlanConfig, ids: np.ndarray) -> set[int]:
    ids = ids[ids >= 0]
    return set((np.searchsorted(cfg.shard_offsets, ids, side="right") - 1).tolist())


@given(streams(max_shards=6), worlds(), st.sampled_from(ALGOS[1:]), st.data())
def test_canonical_shard_sets_stable_across_epochs(data, world, algo, draw) -> None:
    sizes, counts = data
    weights = draw.draw(weights_for(len(counts)))
    assume(has_samples(sizes, counts, weights))
    cfg = PlanConfig(sizes, counts, weights=weights, shuffle=True, shuffle_algo=algo,
                     num_canonical_nodes=world.num_groups * draw.draw(st.integers(1, 2)))
    c_count = cfg.canonical_nodes(world)
    fixed = EpochOrder(cfg, c_count, 0).layout
    allowed = [set(fixed.shard[fixed.pieces_of(c)].tolist()) for c in range(c_count)]
    for epoch in range(3):
        order = EpochOrder(cfg, c_count, epoch)
        for c in range(c_count):
            if order.lengths[c]:
                used = _shards(cfg, order.sequence(c))
                assert used <= allowed[c]
                if not weights:
                    assert used == allowed[c]
    if not weights:  # each physical node's shards are the same every epoch
        for n in range(world.num_nodes):
            seen = [_shards(cfg, plan_node(cfg, world.with_position(n), e).ids) for e in (0, 1)]
            assert seen[0] == seen[1]


@given(streams(), st.sampled_from((None, *ALGOS)), st.sampled_from(METHODS[:3]), st.data())
def test_global_batches_identical_across_node_counts(data, algo, method, draw) -> None:
    sizes, counts = data
    # Global batch B = 8; canonical nodes 4: node counts 1, 2, 4 all allowed.
    topologies = [(1, 4, 2), (2, 2, 2), (4, 1, 2), (2, 1, 4), (1, 2, 4), (4, 2, 1)]
    cfg_kwargs = {"shuffle": algo is not None, "shuffle_algo": algo or "py1e",
                  "num_canonical_nodes": 4, "batching_method": method}
    weights = draw.draw(weights_for(len(counts)))
    assume(has_samples(sizes, counts, weights))
    reference = None
    for nodes, ranks, batch in topologies:
        cfg = PlanConfig(sizes, counts, weights=weights, batch_size=batch, **cfg_kwargs)
        world = World(nodes, ranks, draw.draw(st.integers(1, 3)))
        try:
            seq = assemble(cfg, world, 1)
        except PlanError:  # a stream smaller than one global batch, for every topology
            assume(reference is not None)
            raise
        if method == "random":  # the epoch's positions; ranks pad differently past its end
            seq = seq[:EpochOrder(cfg, 4, 1).span]
        whole = len(seq) - len(seq) % 8
        batches = np.sort(seq[:whole].reshape(-1, 8), axis=1)
        if reference is None:
            reference = (seq, batches)
        else:
            assert np.array_equal(batches, reference[1])
            if method == "random":
                assert np.array_equal(seq, reference[0])


def test_device_per_stream_elastic_with_fixed_device_batch() -> None:
    cfg = PlanConfig(np.array([7, 9, 4, 12]), np.array([2, 2]), batch_size=3, shuffle=True,
                     num_canonical_nodes=4, batching_method="device_per_stream")
    seqs = [assemble(cfg, World(n, 4 // n, 2), 0) for n in (1, 2, 4)]
    assert all(np.array_equal(seqs[0], s) for s in seqs[1:])


@given(setups(weighted=True), st.data())
def test_resume_gives_exactly_the_remainder(setup, draw) -> None:
    cfg, world, epoch = setup
    full, pad = global_order(cfg, epoch, world, with_padding=True)
    start = draw.draw(st.integers(0, len(full)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = plan_node(cfg, world, epoch, start)
    caught = [w for w in caught if "rounded" in str(w.message)]
    global_batch = cfg.device_batch() * world.data_parallel_ranks
    used = plan.sample_in_epoch
    if cfg.batching_method == "random":
        assert used == start and not caught
    else:
        assert used == start - start % global_batch
        assert bool(caught) == (used != start)
    resumed, resumed_pad = global_order(cfg, epoch, world, used, with_padding=True)
    assert np.array_equal(np.sort(resumed[~resumed_pad]), np.sort(full[used:][~pad[used:]]))
    head = min(len(resumed), len(full) - used)
    real_head = ~pad[used:used + head]
    assert np.array_equal(resumed[:head][real_head], full[used:used + head][real_head])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.array_equal(assemble(cfg, world, epoch, start), resumed)


@given(setups(weighted=True))
def test_equal_batches_per_rank_and_padding_only_at_worker_ends(setup) -> None:
    cfg, world, epoch = setup
    plans = node_plans(cfg, world, epoch)
    per_rank = {p.samples_per_rank for p in plans}
    assert len(per_rank) == 1
    (per_rank,) = per_rank
    for plan in plans:
        assert plan.ids.shape[:2] == (world.ranks_per_node, world.workers_per_rank)
        for r in range(world.ranks_per_node):
            assert (plan.ids[r] >= 0).sum() == per_rank
            for w in range(world.workers_per_rank):
                ids = plan.worker_ids(r, w)
                valid = ids >= 0
                assert np.all(valid[: valid.sum()])
        if cfg.batching_method != "random":
            assert per_rank % cfg.device_batch() == 0


@given(setups(weighted=True, method="stratified"))
def test_stratified_batches_have_a_fixed_composition(setup) -> None:
    cfg, world, epoch = setup
    ids = global_order(cfg, epoch, world)
    batch = cfg.device_batch() * world.data_parallel_ranks
    per_batch = np.stack([np.bincount(stream_of(cfg, row), minlength=cfg.num_streams)
                          for row in ids.reshape(-1, batch)])
    assert np.all(per_batch == per_batch[0])
    exact = batch * cfg.samples_per_stream_epoch / cfg.epoch_size
    assert np.all(np.abs(per_batch[0] - exact) < 1)
    # The epoch ends when a stream has no whole part left.
    left = cfg.samples_per_stream_epoch - per_batch.sum(axis=0)
    assert np.any(left < per_batch[0])


@given(setups(weighted=True, method="per_stream"))
def test_per_stream_batches_come_from_one_stream(setup) -> None:
    cfg, world, epoch = setup
    batch = cfg.device_batch() * world.data_parallel_ranks
    for row in assemble(cfg, world, epoch).reshape(-1, batch):
        assert len(np.unique(stream_of(cfg, row))) == 1


@given(setups(weighted=True, method="device_per_stream"))
def test_device_batches_come_from_one_stream(setup) -> None:
    cfg, world, epoch = setup
    for plan in node_plans(cfg, world, epoch):
        for r in range(world.ranks_per_node):
            for w in range(world.workers_per_rank):
                ids = plan.worker_ids(r, w)
                for row in ids[ids >= 0].reshape(-1, cfg.device_batch()):
                    assert len(np.unique(stream_of(cfg, row))) == 1


@given(setups(weighted=True, method="random"), st.integers(2, 3))
def test_replicas_receive_identical_samples(setup, k) -> None:
    cfg, world, epoch = setup
    world = World(world.num_nodes, k * world.ranks_per_node, world.workers_per_rank,
                  replication=k)
    for plan in node_plans(cfg, world, epoch):
        for r in range(0, world.ranks_per_node, k):
            for j in range(1, k):
                assert np.array_equal(plan.ids[r], plan.ids[r + j])
    assemble(cfg, world, epoch)


def test_shard_access_order_lists_first_uses() -> None:
    cfg = PlanConfig(np.array([4, 4, 4]), np.array([3]), batch_size=2)
    plan = plan_node(cfg, World(1, 1, 2), 0)
    assert plan.shard_access_order().tolist() == [0, 1, 2]


@given(streams(), st.sampled_from(ALGOS[1:]), st.integers(1, 2), st.integers(0, 200))
def test_resume_on_a_different_node_count_continues_the_same_order(data, algo, k, start) -> None:
    sizes, counts = data
    cfg = PlanConfig(sizes, counts, batch_size=2, shuffle=True, shuffle_algo=algo,
                     num_canonical_nodes=4 * k)
    start = start % (cfg.epoch_size + 1)
    inside = max(EpochOrder(cfg, 4 * k, 1).span - start, 0)  # past the end, padding differs
    before = assemble(cfg, World(4, 2, 2), 1, start)
    after = assemble(cfg, World(2, 4, 3), 1, start)
    assert np.array_equal(before[:inside], after[:inside])
    assert np.array_equal(after, global_order(cfg, 1, World(2, 4), start))


@given(setups(weighted=True, method="random"))
def test_replication_across_whole_nodes(setup) -> None:
    cfg, world, epoch = setup
    world = World(2 * world.num_nodes, world.ranks_per_node, world.workers_per_rank,
                  replication=2 * world.ranks_per_node)
    plans = node_plans(cfg, world, epoch)
    for n in range(0, world.num_nodes, 2):
        assert np.array_equal(plans[n].ids, plans[n + 1].ids)
        assert all(np.array_equal(plans[n].ids[0], row) for row in plans[n].ids)
    assemble(cfg, world, epoch)


@given(streams(max_shards=8), st.sampled_from((None, *ALGOS[1:])), st.integers(1, 4),
       st.integers(1, 3), st.integers(0, 100))
def test_a_node_materialises_only_its_own_canonical_nodes(data, algo, nodes, k, start) -> None:
    """Also after a resume at any position: the node keeps its canonical nodes (warm cache)."""
    sizes, counts = data
    cfg = PlanConfig(sizes, counts, shuffle=algo is not None, shuffle_algo=algo or "py1e",
                     num_canonical_nodes=nodes * k, batch_size=2)
    world = World(nodes, 2, 2)
    for n in range(nodes):
        asked: set[int] = set()
        original = EpochOrder.sequence

        def spy(self, c, asked=asked, original=original):
            asked.add(c)
            return original(self, c)

        EpochOrder.sequence = spy
        try:
            plan_node(cfg, world.with_position(n), 0, start % cfg.epoch_size)
        finally:
            EpochOrder.sequence = original
        source = EpochOrder(cfg, nodes * k, 0).source
        own = {int(source[c]) for c in range(nodes * k) if c % nodes == n}
        assert asked <= own  # near the end of the epoch a node may need only some of them
        if start % cfg.epoch_size == 0:
            assert asked == own


@given(setups(weighted=True))
def test_plan_worker_matches_the_node_plan(setup) -> None:
    cfg, world, epoch = setup
    for n in range(world.num_nodes):
        plan = plan_node(cfg, world.with_position(n), epoch)
        for r in range(world.ranks_per_node):
            for w in range(world.workers_per_rank):
                here = world.with_position(n, r, w)
                assert np.array_equal(plan_worker(cfg, here, epoch), plan.worker_ids(r, w))


@given(setups(weighted=True), st.integers(0, 40))
def test_a_one_worker_plan_deals_each_workers_share(setup, resume) -> None:
    cfg, world, epoch = setup
    sample = resume % cfg.epoch_size if cfg.batch_size is not None else 0
    one = dataclasses.replace(world, workers_per_rank=1, worker=0)
    for n in range(world.num_nodes):
        plan = plan_node(cfg, one.with_position(n), epoch, sample)
        full = plan_node(cfg, world.with_position(n), epoch, sample)
        for r in range(world.ranks_per_node):
            for w in range(world.workers_per_rank):
                got = plan.worker_share(r, w, world.workers_per_rank)
                assert np.array_equal(got, full.worker_ids(r, w))
    if world.workers_per_rank > 1:
        with pytest.raises(PlanError, match="one worker per rank"):
            full.worker_share(0, 0, world.workers_per_rank)


@pytest.mark.parametrize(("workers", "skip"), [(1, 0), (3, 0), (3, 1), (2, 4), (4, 7)])
def test_dealing_after_skipped_batches_leaves_the_rank_order(workers, skip) -> None:
    """Worker w's k-th batch is the rank's batch skip + k * workers + w: taking the workers'
    batches in turn gives the rank's list from batch `skip` (the rest is -1 padding)."""
    rank = np.append(np.arange(13), [-1]).astype(np.int64)  # 7 batches of 2, the last partial
    shares = [deal_batches(rank, 2, w, workers, skip).reshape(-1, 2) for w in range(workers)]
    assert len({len(share) for share in shares}) == 1
    turns = np.stack(shares, axis=1).reshape(-1)
    assert np.array_equal(turns[:len(rank) - 2 * skip], rank[2 * skip:])
    assert (turns[len(rank) - 2 * skip:] == -1).all()
    with pytest.raises(PlanError, match="whole batches of 3"):
        deal_batches(rank, 3, 0, workers)


@given(setups(method="random"))
def test_padding_is_bounded(setup) -> None:
    cfg, world, epoch = setup
    _, pad = global_order(cfg, epoch, world, with_padding=True)
    canonical = cfg.canonical_nodes(world)
    global_batch = cfg.device_batch() * world.data_parallel_ranks
    assert pad.sum() < canonical + global_batch
