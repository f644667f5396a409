"""What `equal_packs` costs a node per epoch: the packer replayed over its own ranks' planned
samples (each node's share, then one swap of counts through the job's store) against the
replay over every node's ranks (what a node does when no store answers), in the same run.

    .venv/bin/python benchmarks/pack_count.py                    # 8 nodes x 8 ranks, 2M samples
    .venv/bin/python benchmarks/pack_count.py --nodes 4 --n 500000

CPU time (process_time, best of --repeat). The swap itself is timed with --nodes real clients
of a TCPStore on loopback. Prints only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.coord.exchange import NodeExchange, StoreAddress
from streaming.packing import pack_lengths
from streaming.packing.equal import node_most_packs
from streaming.plan import PlanConfig, World, plan_node
from streaming.plan.planner import NodePlan


def best_cpu(fn, repeat: int) -> tuple[int, float]:
    best, result = float("inf"), 0
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    return result, best


def swap_seconds(nodes: int) -> float:
    """Wall time for `nodes` clients to publish and gather one count each."""
    from torch.distributed import TCPStore

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=30))
    address = StoreAddress("127.0.0.1", server.port)
    clients = [NodeExchange(address, timeout=30) for _ in range(nodes)]
    threads = [threading.Thread(target=c.gather, args=("bench", k, nodes, k))
               for k, c in enumerate(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2_000_000, help="samples in the epoch")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=8, help="ranks per node")
    parser.add_argument("--packing-length", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    lengths = np.maximum(1, rng.lognormal(np.log(600), 1.0, args.n)).astype(np.int64)
    per_shard = 4096
    shards = -(-args.n // per_shard)
    sizes = np.full(shards, per_shard, np.int64)
    sizes[-1] = args.n - per_shard * (shards - 1)
    cfg = PlanConfig(samples_per_shard=sizes, shards_per_stream=np.array([shards], np.int64),
                     shuffle=True, num_canonical_nodes=args.nodes)
    world = World(args.nodes, args.ranks, 1, 0, 0)
    plans: dict[int, NodePlan] = {}

    def count(rank: World) -> int:
        if rank.node not in plans:
            plans[rank.node] = plan_node(cfg, rank, 0, 0)
        ids = plans[rank.node].worker_ids(rank.rank_in_node, 0)
        ids = ids[ids >= 0]
        return len(pack_lengths(lengths[ids], args.packing_length))

    def own() -> int:
        return node_most_packs(count, world, 0)

    def every() -> int:
        return max(node_most_packs(count, world, node) for node in range(args.nodes))

    for node in range(args.nodes):  # plan outside the timing: both paths share the plans
        plans[node] = plan_node(cfg, world.with_position(node), 0, 0)
    mine, own_s = best_cpu(own, args.repeat)
    most, every_s = best_cpu(every, args.repeat)
    swap = swap_seconds(args.nodes)
    print(f"{args.n:,} samples, {args.nodes} nodes x {args.ranks} ranks, "
          f"packing_length {args.packing_length}")
    print(f"  own node's ranks (then swap) : {own_s:8.3f} s CPU  (node 0 max {mine} packs)")
    print(f"  every node's ranks          : {every_s:8.3f} s CPU  (job max {most} packs)")
    print(f"  ratio own / every           : {own_s / every_s:8.3f}   (1/nodes = "
          f"{1 / args.nodes:.3f})")
    print(f"  swap through the store      : {swap * 1000:8.1f} ms wall ({args.nodes} clients)")


if __name__ == "__main__":
    main()
