"""`streaming plan CONFIG.yaml`: epoch size, per-stream counts, the smallest workable cache, and
a picture of which stream fills each slot of the first global batches."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from streaming.cli._common import UserError, add_command, human_bytes
from streaming.cli.plan_setup import Setup, load_setup

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
    from streaming.cli.plan_cost import cache_minimum, print_json, wants_cost

    if args.json:
        return print_json(args, setup, config)
    from streaming.plan import global_order

    order = global_order(setup.cfg, args.epoch, setup.world)  # stratified may serve fewer
    _print_plan(args, setup, len(order))
    minimum = cache_minimum(args, setup)
    print(f"min cache size    {minimum.bytes} bytes ({human_bytes(minimum.bytes)}) per node "
          f"(largest at node {minimum.node}): the shards its readers use at once, one being "
          "decompressed, and the cache's other files")
    print(f"no-eviction size  {minimum.whole} bytes ({human_bytes(minimum.whole)}) per node: "
          "holds every shard a node's epoch reads, each downloaded once")
    if wants_cost(args, setup):
        from streaming.cli.plan_cost import print_cost

        print_cost(args, setup, config, minimum)
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
