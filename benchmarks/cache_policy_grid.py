"""The cache policy's egress over a grid of plans, in the offline simulation that drives the
engine's own policy functions (`streaming.cache.policy.simulated_cache`), against the floor
(each shard a node's epoch reads, fetched once) and the Belady optimum for the same plan and
limit.

    .venv/bin/python benchmarks/cache_policy_grid.py            # the whole grid
    .venv/bin/python benchmarks/cache_policy_grid.py --quick    # stream-shaped methods, 1 node
    .venv/bin/python benchmarks/cache_policy_grid.py --worst 10 # also list the 10 worst cells

Grid: 1 and 2 streams (70/30 proportions) of 40 shards of 96-160 samples each, `epoch_size`
0.3x, 1x and 2x the stored samples, every shuffle algorithm that can be fitted, every batching
method, 1 and 4 ranks of 2 workers per node, 1 and 2 nodes, limits of 1x, 2x and 4x the
minimum `streaming plan` states. Each node's epoch counts once (a "node-epoch"). Prints, per
batching method x shuffle x limit multiple, the worst and mean ratio to the floor and to the
optimum, then the totals the issue's bounds are checked against: at most 1.25x the floor at 2x
the minimum and above, and at most 1.10x the optimum at every limit.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming.cache.policy.cache_limit import CacheLimit  # noqa: E402
from streaming.cache.policy.egress_bounds import belady_egress, floor_egress  # noqa: E402
from streaming.cache.policy.minimum_limit import Footprint, minimum_limit  # noqa: E402
from streaming.observe.forecast import RunSpec, job_minimum, predict, reader_sequences  # noqa: E402
from streaming.plan import PlanConfig, StreamWeights, World, plan_node  # noqa: E402

SHARDS = 40  # per stream
BATCH = 8
ALGOS = ("py1e", "py1b", "py1br", "py1s", "py2s")
METHODS = ("random", "stratified", "per_stream", "device_per_stream")
EPOCH_SIZES = (0.3, 1.0, 2.0)
RANKS = (1, 4)
NODES = (1, 2)
MULTIPLES = (1, 2, 4)
FLOOR_BOUND, OPTIMUM_BOUND = 1.25, 1.10


@dataclass(frozen=True)
class Cell:
    """One node-epoch of the grid: its config, and its downloaded bytes against the yardsticks."""

    method: str
    algo: str
    multiple: int
    streams: int
    epoch_size: float
    ranks: int
    nodes: int
    node: int
    bytes: int
    floor: int
    optimum: int

    @property
    def to_floor(self) -> float:
        """Downloaded bytes over the floor's."""
        return self.bytes / max(self.floor, 1)

    @property
    def to_optimum(self) -> float:
        """Downloaded bytes over the optimum's."""
        return self.bytes / max(self.optimum, 1)


def _data(streams: int) -> tuple[np.ndarray, Footprint, np.ndarray]:
    """Samples per shard, footprint and compressed bytes of `streams` streams."""
    rng = np.random.default_rng(7)
    count = SHARDS * streams
    samples = rng.integers(96, 161, count)
    raw = samples * 1024
    zipped = raw // 2
    footprint = Footprint.of(raw, zipped, np.zeros(count, bool), np.ones(count, bool),
                             slack=4096)
    return samples, footprint, zipped


def _config(streams: int, epoch_size: float, algo: str, method: str) -> PlanConfig:
    samples, _, _ = _data(streams)
    weights = () if streams == 1 else (StreamWeights(proportion=0.7),
                                       StreamWeights(proportion=0.3))
    return PlanConfig(samples, np.full(streams, SHARDS), weights=weights,
                      epoch_size=int(samples.sum() * epoch_size), batch_size=BATCH,
                      shuffle=True, shuffle_algo=algo, batching_method=method)


def _minimum(spec: RunSpec) -> int:
    """The minimum cache_limit of `spec` counting every DataLoader worker as a reader (the
    stated minimum counts one reader per rank, which 2 workers in lock-step can exceed)."""
    config = job_minimum(spec).config
    return max(minimum_limit(plan_node(config, spec.world.with_position(n), 0).ids,
                             spec.footprint, config.shard_offsets, BATCH).bytes
               for n in range(spec.world.num_nodes))


def _cells(streams: int, epoch_size: float, algo: str, method: str, ranks: int,
           nodes: int) -> list[Cell]:
    _, footprint, zipped = _data(streams)
    config = _config(streams, epoch_size, algo, method)
    world = World(num_nodes=nodes, ranks_per_node=ranks, workers_per_rank=2)
    base = RunSpec(config, world, footprint, zipped, None, predownload=BATCH * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minimum = _minimum(base)
        out = []
        for multiple in MULTIPLES:
            spec = RunSpec(config, world, footprint, zipped,
                           CacheLimit.parse(minimum * multiple), predownload=BATCH * 2)
            forecast = predict(spec)
            for node, epochs in zip(forecast.node_ids, forecast.nodes):
                readers = reader_sequences(forecast.config, world, node, 0)
                floor = floor_egress(readers, footprint, zipped).bytes
                best = belady_egress(readers, footprint, zipped, spec.limit_bytes).bytes
                out.append(Cell(method, algo, multiple, streams, epoch_size, ranks, nodes, node,
                                epochs[0].bytes_downloaded, floor, best))
    return out


def run(quick: bool) -> list[Cell]:
    """Every node-epoch of the grid (`quick`: stream-shaped methods on one node only)."""
    methods = METHODS[1:] if quick else METHODS
    nodes = (1,) if quick else NODES
    cells: list[Cell] = []
    for method, algo, streams, size, ranks, n in itertools.product(
            methods, ALGOS, (1, 2), EPOCH_SIZES, RANKS, nodes):
        cells += _cells(streams, size, algo, method, ranks, n)
    return cells


def report(cells: list[Cell], worst: int) -> None:
    """Print the table and the totals."""
    print("| batching | shuffle | limit | worst / floor | worst / Belady | mean / Belady |")
    print("|---|---|---|---|---|---|")
    for method, algo, multiple in itertools.product(METHODS, ALGOS, MULTIPLES):
        part = [c for c in cells if (c.method, c.algo, c.multiple) == (method, algo, multiple)]
        if not part:
            continue
        print(f"| {method} | {algo} | {multiple}x min | "
              f"{max(c.to_floor for c in part):.2f} | {max(c.to_optimum for c in part):.2f} | "
              f"{np.mean([c.to_optimum for c in part]):.3f} |")
    wide = [c for c in cells if c.multiple >= 2]
    over_floor = sum(c.to_floor > FLOOR_BOUND for c in wide)
    over_best = [c for c in cells if c.to_optimum > OPTIMUM_BOUND]
    print(f"\n{len(cells)} node-epochs; at 2x the minimum and above, {over_floor} of {len(wide)} "
          f"over {FLOOR_BOUND}x the floor; {len(over_best)} of {len(cells)} over "
          f"{OPTIMUM_BOUND}x the Belady optimum (worst "
          f"{max((c.to_optimum for c in cells), default=0):.3f}x)")
    for c in sorted(cells, key=lambda c: -c.to_optimum)[:worst]:
        print(f"  {c.to_optimum:.3f}x optimum, {c.to_floor:.3f}x floor: {c.method} {c.algo} "
              f"{c.multiple}x min, {c.streams} stream(s), epoch_size {c.epoch_size}x, "
              f"{c.ranks} rank(s) x 2 workers, node {c.node} of {c.nodes}")


def main() -> None:
    """Run the grid and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stream-shaped methods, 1 node")
    parser.add_argument("--worst", type=int, default=0, help="list the N worst node-epochs")
    args = parser.parse_args()
    start = time.perf_counter()
    cells = run(args.quick)
    report(cells, args.worst)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
