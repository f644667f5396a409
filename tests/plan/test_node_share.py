"""stratified, per_stream and device_per_stream plans cost a node its share: each canonical
unit's samples equal a whole-epoch reference computation, node plans assemble into the global
order on topologies up to 16 x 8 x 8 (also after resumes), and a node builds only its own units'
picks and their lenders'."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streaming.errors import PlanError
from streaming.plan import PlanConfig, World, global_order, plan_node
from streaming.plan.batching.stratified import slot_streams
from streaming.plan.order import EpochOrder
from tests.plan.helpers import ALGOS, assemble, has_samples, streams, weights_for

METHODS = ("stratified", "per_stream", "device_per_stream")


def _stream_of(cfg: PlanConfig, ids: np.ndarray) -> np.ndarray:
    return np.searchsorted(cfg.stream_offsets, ids, side="right") - 1


def _supply(order: EpochOrder, c: int, s: int) -> np.ndarray:
    """Canonical node c's stream-s picks in piece order, straight from the whole picks."""
    ids, bounds = order.picks(c)
    pieces = np.flatnonzero(order.layout.stream[order.layout.pieces_of(c)] == s)
    return np.concatenate([ids[bounds[p]:bounds[p + 1]] for p in pieces] or [ids[:0]])


def reference_units(cfg: PlanConfig, epoch: int, num_canonical: int, demand: np.ndarray
                    ) -> tuple[dict[tuple[int, int], np.ndarray], dict[int, set[int]]]:
    """Whole-epoch reference: every unit keeps its own first samples of each stream and the
    surpluses of all units, laid end to end in canonical order, fill the deficits in order.
    Returns each (unit, stream)'s sorted samples and each unit's lenders."""
    order = EpochOrder(cfg, num_canonical, epoch)
    units, lenders = {}, {c: set() for c in range(num_canonical)}
    for s in range(cfg.num_streams):
        supply = [_supply(order, c, s) for c in range(num_canonical)]
        keep = [min(len(supply[c]), int(demand[c, s])) for c in range(num_canonical)]
        pool = np.concatenate([supply[c][keep[c]:] for c in range(num_canonical)])
        owner = np.concatenate([np.full(len(supply[c]) - keep[c], c)
                                for c in range(num_canonical)])
        debt = 0
        for c in range(num_canonical):
            need = int(demand[c, s]) - keep[c]
            units[c, s] = np.sort(np.concatenate((supply[c][:keep[c]], pool[debt:debt + need])))
            lenders[c] |= set(owner[debt:debt + need].tolist())
            debt += need
    return units, lenders


def _unit_columns(cfg: PlanConfig, world: World, num_canonical: int) -> list[slice]:
    """Each canonical unit's slots of a global batch: whole device batches for
    device_per_stream, an even cut of the batch for the others."""
    b, ranks = cfg.device_batch(), world.data_parallel_ranks
    if cfg.batching_method == "device_per_stream":
        bounds = np.arange(num_canonical + 1) * ranks // num_canonical * b
    else:
        bounds = np.arange(num_canonical + 1) * b * ranks // num_canonical
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


def _unit_ids(cfg: PlanConfig, world: World, num_canonical: int, seq: np.ndarray,
              pad: np.ndarray) -> list[np.ndarray]:
    """Each unit's real (not padding) ids over the epoch."""
    global_batch = cfg.device_batch() * world.data_parallel_ranks
    rows, real = seq.reshape(-1, global_batch), ~pad.reshape(-1, global_batch)
    return [rows[:, cols][real[:, cols]] for cols in _unit_columns(cfg, world, num_canonical)]


def _observed_demand(cfg, units: list[np.ndarray]) -> np.ndarray:
    return np.stack([np.bincount(_stream_of(cfg, ids), minlength=cfg.num_streams)
                     for ids in units]).astype(np.int64)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(max_streams=3, max_shards=6, max_size=40), st.sampled_from((None, *ALGOS)),
       st.sampled_from(METHODS), st.integers(1, 6), st.integers(1, 3), st.integers(0, 2**16),
       st.data())
def test_every_unit_serves_the_whole_epoch_reference(data, algo, method, canonical, batch,
                                                     seed, draw) -> None:
    sizes, counts = data
    weights = draw.draw(weights_for(len(counts)))
    assume(has_samples(sizes, counts, weights))
    cfg = PlanConfig(sizes, counts, weights=weights, batch_size=batch, shuffle=algo is not None,
                     shuffle_algo=algo or "py1e", shuffle_seed=seed, batching_method=method,
                     num_canonical_nodes=canonical)
    world = World(1, draw.draw(st.integers(1, 4)), 1)
    global_batch = batch * world.data_parallel_ranks
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seq, pad = global_order(cfg, 1, world, with_padding=True)
    except PlanError:
        assume(False)
        return
    units = _unit_ids(cfg, world, canonical, seq, pad)
    demand = _observed_demand(cfg, units)
    expected, _ = reference_units(cfg, 1, canonical, demand)
    for c, ids in enumerate(units):
        for s in range(cfg.num_streams):
            assert np.array_equal(np.sort(ids[_stream_of(cfg, ids) == s]), expected[c, s])
    batches = len(seq) // global_batch
    totals = cfg.samples_per_stream_epoch
    if method == "per_stream":
        assert batches == int((totals // global_batch).sum())
    elif method == "stratified":
        parts = demand.sum(axis=0) // batches
        assert batches == int((totals // parts).min())
    else:
        assert (~pad).sum() == batch * int((totals // batch).sum())
        assert pad.sum() < global_batch and not pad[:len(pad) - pad.sum()].any()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("topology", [(1, 1, 1), (2, 2, 2), (4, 8, 2), (16, 8, 8)])
def test_node_plans_assemble_into_the_global_order(method, topology) -> None:
    rng = np.random.default_rng(sum(topology))
    sizes = rng.integers(20, 90, size=60)
    world = World(*topology)
    batch = max(1, 8 // world.data_parallel_ranks)
    cfg = PlanConfig(sizes, np.array([30, 20, 10]), batch_size=batch, shuffle=True,
                     shuffle_seed=int(rng.integers(2**16)), batching_method=method,
                     num_canonical_nodes=16)
    global_batch = batch * world.data_parallel_ranks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start in (0, global_batch * 3 + 1):
            whole = global_order(cfg, 2, world, start)
            assert np.array_equal(assemble(cfg, world, 2, start), whole)
        assert len(whole) and len(whole) % global_batch == 0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("nodes,canonical", [(4, 4), (4, 8), (3, 6)])
def test_a_node_builds_only_its_units_and_their_lenders(method, nodes, canonical) -> None:
    rng = np.random.default_rng(nodes * canonical)
    cfg = PlanConfig(rng.integers(30, 70, size=48), np.array([24, 16, 8]), batch_size=2,
                     shuffle=True, batching_method=method, num_canonical_nodes=canonical)
    world = World(nodes, 2, 2)
    seq, pad = global_order(cfg, 0, world, with_padding=True)
    demand = _observed_demand(cfg, _unit_ids(cfg, world, canonical, seq, pad))
    _, lenders = reference_units(cfg, 0, canonical, demand)
    per_node = canonical // nodes
    for n in range(nodes):
        asked: list[int] = []
        original_picks, original_sequence = EpochOrder.picks, EpochOrder.sequence

        def spy(self, c, asked=asked, original=original_picks):
            asked.append(c)
            return original(self, c)

        def refuse(self, c):
            raise AssertionError("a stream-shaped plan never builds a canonical sequence")

        EpochOrder.picks, EpochOrder.sequence = spy, refuse
        try:
            plan_node(cfg, world.with_position(n), 0)
        finally:
            EpochOrder.picks, EpochOrder.sequence = original_picks, original_sequence
        units = range(n * per_node, (n + 1) * per_node)
        allowed = set(units).union(*(lenders[c] for c in units))
        assert len(asked) == len(set(asked))  # every source's picks built once
        assert set(asked) <= allowed and set(units) <= set(asked)


@given(st.lists(st.integers(1, 40), min_size=1, max_size=6))
def test_slot_streams_place_slots_as_sorting_their_times(parts) -> None:
    parts = np.array(parts, dtype=np.int64)
    stream = np.repeat(np.arange(len(parts)), parts)
    slot = np.arange(len(stream)) - np.repeat(np.cumsum(parts) - parts, parts)
    # Slot t of stream s at time (t + 0.5) / part_s; equal times keep the earlier stream first.
    expected = stream[np.lexsort((stream, (2 * slot + 1) / (2 * parts[stream])))]
    assert np.array_equal(slot_streams(parts), expected)
