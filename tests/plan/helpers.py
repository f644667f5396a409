"""Strategies and an independent re-assembly of node plans into the global sequence."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from streaming.plan import PlanConfig, StreamWeights, World, plan_node
from streaming.plan.mixing import stream_targets

ALGOS = ("naive", "py1s", "py2s", "py1b", "py1br", "py1e")


@st.composite
def streams(draw, max_streams: int = 3, max_shards: int = 5, max_size: int = 30):
    """(samples_per_shard, shards_per_stream) with at least one sample in every stream."""
    num = draw(st.integers(1, max_streams))
    counts = [draw(st.integers(1, max_shards)) for _ in range(num)]
    sizes = []
    for c in counts:
        shard_sizes = draw(st.lists(st.integers(0, max_size), min_size=c, max_size=c))
        if sum(shard_sizes) == 0:
            shard_sizes[0] = 1
        sizes += shard_sizes
    return np.array(sizes, dtype=np.int64), np.array(counts, dtype=np.int64)


@st.composite
def worlds(draw, max_nodes: int = 3):
    nodes = draw(st.integers(1, max_nodes))
    ranks = draw(st.integers(1, 3))
    workers = draw(st.integers(1, 3))
    return World(num_nodes=nodes, ranks_per_node=ranks, workers_per_rank=workers)


@st.composite
def weights_for(draw, num_streams: int):
    """() or one StreamWeights per stream, all relative or all absolute."""
    kind = draw(st.sampled_from(["none", "proportion", "absolute"]))
    if kind == "none":
        return ()
    if kind == "proportion":
        props = [draw(st.floats(0.05, 5.0)) for _ in range(num_streams)]
        return tuple(StreamWeights(proportion=p) for p in props)
    out = []
    for _ in range(num_streams):
        if draw(st.booleans()):
            out.append(StreamWeights(repeat=draw(st.sampled_from([0.3, 0.5, 1.0, 1.5, 2.25]))))
        else:
            out.append(StreamWeights(choose=draw(st.integers(1, 50))))
    return tuple(out)


def has_samples(sizes: np.ndarray, counts: np.ndarray, weights: tuple) -> bool:
    """Whether these weights leave at least one sample in the epoch."""
    per_stream = np.add.reduceat(sizes, np.cumsum(counts) - counts)
    return bool(stream_targets(per_stream, weights, None, 0).sum() > 0)


def shuffle_kwargs(draw) -> dict:
    algo = draw(st.sampled_from((None, *ALGOS)))
    if algo is None:
        return {"shuffle": False}
    return {"shuffle": True, "shuffle_algo": algo, "shuffle_seed": draw(st.integers(0, 2**20)),
            "shuffle_block_size": draw(st.sampled_from([None, 4, 16, 64]))}


def node_plans(cfg: PlanConfig, world: World, epoch: int, start: int = 0):
    return [plan_node(cfg, world.with_position(n), epoch, start) for n in range(world.num_nodes)]


def rank_sequence(plan, r: int, workers: int) -> np.ndarray:
    """Rank r's samples in the order its DataLoader batches them (-1 dropped)."""
    b = plan.batch_size
    rows = plan.ids[r]
    nb = rows.shape[1] // b * workers
    parts = [rows[g % workers, (g // workers) * b:(g // workers + 1) * b] for g in range(nb)]
    seq = np.concatenate(parts) if parts else np.empty(0, np.int64)
    return seq[seq >= 0]


def assemble(cfg: PlanConfig, world: World, epoch: int, start: int = 0) -> np.ndarray:
    """Rebuild the global sequence (from `start`) that all ranks' plans consume together.

    random: data-parallel rank l of node group q holds positions l * groups + q (mod ranks)
    counted from the group's first position; other methods: rank d holds slot d of each
    global batch.
    """
    plans = node_plans(cfg, world, epoch, start)
    b = cfg.device_batch()
    ranks, workers = world.ranks_per_node, world.workers_per_rank
    per_rank = plans[0].samples_per_rank
    dp = world.data_parallel_ranks
    groups, group_ranks = world.num_groups, world.group_ranks
    out = np.full(per_rank * dp, -2, dtype=np.int64)
    for plan in plans:
        assert plan.ids.shape[:2] == (ranks, workers)
        assert plan.samples_per_rank == per_rank
    for n, plan in enumerate(plans):
        for r in range(ranks):
            d = (n * ranks + r) // world.replication
            seq = rank_sequence(plan, r, workers)
            assert len(seq) == per_rank
            if cfg.batching_method == "random":
                q, local = divmod(d, group_ranks)
                first = (q - start) % groups
                pos = first + groups * (local + group_ranks * np.arange(per_rank))
            else:
                j = np.arange(per_rank)
                pos = (j // b) * b * dp + d * b + j % b
            previous = out[pos]
            assert np.all((previous == -2) | (previous == seq))
            out[pos] = seq
    assert np.all(out >= 0)
    return out
