"""`streaming plan CONFIG.yaml`: epoch size, per-stream counts, the smallest workable cache, and
a picture of which stream fills each slot of the first global batches."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from streaming.cli._common import UserError, add_command, human_bytes
from streaming.cli.plan_setup import Setup, load_setup

if TYPE_CHECKING:
    from streaming.plan import PlanConfig, World

EXAMPLES = """
  streaming plan mix.yaml                      # numbers, and mix.png with the first batches
  streaming plan mix.yaml --png out.png --batches 64

  mix.yaml:
    streams:
      - {local: data/web, proportion: 0.7}
      - {local: data/code, proportion: 0.3}
    batch_size: 8                 # per device
    batching_method: stratified   # random | stratified | per_stream | device_per_stream
    epoch_size: 100k
    shuffle: true
    topology: {nodes: 2, ranks_per_node: 8, workers_per_rank: 2}
"""

def register(sub) -> None:
    p = add_command(sub, "plan", "Preview an epoch plan: sizes, cache needs, batch composition.",
                    EXAMPLES)
    p.add_argument("config", metavar="CONFIG.yaml", help="streams, weights, batching, topology")
    p.add_argument("--png", help="where to draw the first batches (default: CONFIG stem + .png)")
    p.add_argument("--batches", type=int, default=32, help="global batches to draw (default 32)")
    p.add_argument("--epoch", type=int, default=0, help="epoch to plan (default 0)")
    from streaming.cli.plan_cost import add_cost_arguments

    add_cost_arguments(p)
    p.set_defaults(run=run)


def min_cache_bytes(setup: Setup, epoch: int, jobs: int | None = None) -> tuple[int, int]:
    """(bytes, node) of the largest set of shards one node reads at the same step.

    At step k every DataLoader worker of every rank on a node holds its k-th batch; the shards
    those batches touch must all be cached at once (raw file plus its compressed copy, both
    present while a shard is being decompressed). The maximum over steps and nodes is the
    smallest cache_limit under which the plan can run without a shard evicted mid-use. The
    nodes are planned in a pool of processes for a large run (`node_pool`).

    Args:
        setup: the config.
        epoch: the epoch planned.
        jobs: processes that plan the nodes (`--jobs`; None: `node_pool.plan_jobs` decides).
    """
    from streaming.cli.node_pool import node_map, plan_jobs

    cost = np.concatenate([np.asarray(ix.raw_bytes, np.int64) + np.asarray(ix.zip_bytes,
                                                                          np.int64)
                           for ix in setup.indexes])
    nodes = setup.world.num_nodes
    with node_map(plan_jobs(jobs, nodes, int(setup.cfg.epoch_size))) as map_nodes:
        needs = list(map_nodes(partial(node_min_cache, setup.cfg, setup.world, cost, epoch),
                               range(nodes)))
    node = int(np.argmax(needs)) if needs else 0
    return (int(needs[node]) if needs else 0), node


def node_min_cache(cfg: PlanConfig, world: World, cost: np.ndarray, epoch: int,
                   node: int) -> int:
    """The most bytes of shards `node`'s readers read at one step (see `min_cache_bytes`).

    Args:
        cfg: the plan config.
        world: the job's topology.
        cost: cache bytes of each shard while it is prepared (raw plus compressed).
        epoch: the epoch planned.
        node: the node.
    """
    from streaming.plan import plan_node

    plan = plan_node(cfg, world.with_position(node), epoch)
    ranks, workers, n = plan.ids.shape
    batch = plan.batch_size
    if n == 0:
        return 0
    steps = plan.ids.reshape(ranks * workers, n // batch, batch).transpose(1, 0, 2)
    steps = steps.reshape(n // batch, -1)
    shards = np.searchsorted(cfg.shard_offsets, steps, side="right") - 1
    shards = np.sort(np.where(steps >= 0, shards, -1), axis=1)
    fresh = np.ones_like(shards, dtype=bool)
    fresh[:, 1:] = shards[:, 1:] != shards[:, :-1]
    fresh &= shards >= 0
    return int(np.where(fresh, cost[np.maximum(shards, 0)], 0).sum(axis=1).max())


def batch_streams(setup: Setup, order: np.ndarray, batches: int) -> np.ndarray:
    """[batches, global batch size] stream index of each slot of the first global batches.

    Args:
        setup: the config.
        order: the epoch's global order of sample ids (`global_order`).
        batches: global batches wanted.
    """
    ids = np.asarray(order)
    size = setup.cfg.device_batch() * setup.world.data_parallel_ranks
    count = min(batches, len(ids) // size)
    if count == 0:
        raise UserError(f"the epoch ({len(ids)} samples) is smaller than one global batch")
    ids = ids[: count * size].reshape(count, size)
    return np.searchsorted(setup.cfg.stream_offsets, ids, side="right") - 1


def run(args: argparse.Namespace) -> int:
    config = Path(args.config)
    setup = load_setup(config)
    from streaming.cli.plan_cost import print_json, wants_cost

    if args.json:
        return print_json(args, setup, config)
    from streaming.plan import global_order

    order = global_order(setup.cfg, args.epoch, setup.world)  # stratified may serve fewer
    _print_plan(args, setup, len(order))
    need, node = min_cache_bytes(setup, args.epoch, args.jobs)
    print(f"min cache size    {need} bytes ({human_bytes(need)}) per node (largest at node "
          f"{node}): shards all workers of a node read at one step")
    if wants_cost(args, setup):
        from streaming.cli.plan_cost import print_cost

        print_cost(args, setup, config)
    from streaming.cli.plan_plot import draw_batches

    png = Path(args.png) if args.png else config.with_suffix(".png")
    draw_batches(batch_streams(setup, order, args.batches), setup.names, png,
                 title=f"{setup.cfg.batching_method} batching, epoch {args.epoch}")
    print(f"batch picture     {png}")
    return 0


def _print_plan(args: argparse.Namespace, setup: Setup, served: int) -> None:
    cfg, world = setup.cfg, setup.world
    global_batch = cfg.device_batch() * world.data_parallel_ranks
    print(f"streams           {len(setup.names)}  ({int(cfg.shards_per_stream.sum())} shards)")
    print(f"epoch size        {cfg.epoch_size} samples, {-(-served // global_batch)} "
          f"global batches of {global_batch}")
    print(f"topology          {world.num_nodes} nodes x {world.ranks_per_node} ranks x "
          f"{world.workers_per_rank} workers, batching {cfg.batching_method}")
    width = max(len(n) for n in setup.names)
    for name, stored, chosen in zip(setup.names, cfg.samples_per_stream,
                                    cfg.samples_per_stream_epoch):
        share = chosen / cfg.epoch_size
        print(f"  {name:<{width}}  {int(stored):>10} stored  {int(chosen):>10} per epoch "
              f"({share:6.1%})")
