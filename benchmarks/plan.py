"""Epoch-planning benchmark: one node's plan for 8 nodes x 8 ranks x 8 workers, batch 32, py1e.

Each size runs in a fresh subprocess so peak RSS (ru_maxrss) belongs to that size alone.
Prints time and memory, and ratios against the reference implementation measured on this
machine (16.7 s and 2.6 GB for 100M samples; it cannot plan 1B in 24 GB). Never asserts.

    .venv/bin/python benchmarks/plan.py [--sizes 10M,100M,1B] [--epochs 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REFERENCE = {100_000_000: (16.7, 2.6 * 2**30)}
SHARD = 50_000
CHILD = r"""
import json, resource, sys, time, tracemalloc
import numpy as np
from streaming.plan import PlanConfig, World, plan_node, plan_worker
total, epochs = int(sys.argv[1]), int(sys.argv[2])
sizes = np.full(total // {shard}, {shard}, dtype=np.int64)
cfg = PlanConfig(sizes, np.array([len(sizes)]), batch_size=32, shuffle=True, shuffle_algo="py1e")
world = World(num_nodes=8, ranks_per_node=8, workers_per_rank=8, node=3, rank_in_node=5, worker=2)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
node_times = []
for epoch in range(epochs):
    t = time.perf_counter()
    plan = plan_node(cfg, world, epoch)
    node_times.append(time.perf_counter() - t)
    samples = int((plan.ids >= 0).sum())
    del plan
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t = time.perf_counter()
ids = plan_worker(cfg, world, 0)
worker_time = time.perf_counter() - t
tracemalloc.start()
plan_node(cfg, world, 0)
traced = tracemalloc.get_traced_memory()[1]
print(json.dumps(dict(node=min(node_times), worker=worker_time, rss=peak, base=base,
                      traced=traced, samples=samples, worker_samples=int((ids >= 0).sum()))))
""".replace("{shard}", str(SHARD))


def parse_size(text: str) -> int:
    units = {"k": 10**3, "m": 10**6, "b": 10**9}
    text = text.strip().lower()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def run(total: int, epochs: int) -> dict | None:
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", CHILD, str(total), str(epochs)], cwd=root,
                          capture_output=True, text=True, env={"PYTHONPATH": str(root)})
    if proc.returncode:
        print(f"  {total:>13,}: failed ({proc.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10M,100M,1B")
    parser.add_argument("--epochs", type=int, default=2, help="epochs timed (best is kept)")
    args = parser.parse_args()
    gib = 2**30
    print("one node's plan: 8 nodes x 8 ranks x 8 workers, batch 32, py1e, 50k-sample shards")
    for total in (parse_size(s) for s in args.sizes.split(",")):
        r = run(total, args.epochs)
        if r is None:
            continue
        line = (f"  {total:>13,} samples: node plan {r['node']:7.2f} s, one worker "
                f"{r['worker']:7.2f} s, peak RSS {r['rss'] / gib:6.2f} GiB "
                f"(interpreter {r['base'] / gib:.2f}), traced {r['traced'] / gib:6.2f} GiB, "
                f"{r['samples']:,} samples on the node")
        print(line)
        if total in REFERENCE:
            ref_time, ref_mem = REFERENCE[total]
            print(f"      vs reference: {ref_time / r['node']:5.1f}x faster (target >= 5x), "
                  f"{ref_mem / r['rss']:5.1f}x less memory (target >= 4x)")
        if total >= 10**9:
            print("      reference: cannot plan 1B samples in 24 GB")


if __name__ == "__main__":
    main()
