"""Cost-prediction benchmark: how long `streaming plan --json` takes to predict a job's
downloads, with and without a cache limit that evicts, in one process and in a pool.

A synthetic index.json of 64 MiB shards (40 MiB zstd) of 50,000 samples each stands in for the
dataset (`streaming plan` reads only the index). Each case runs the command once per `--jobs`
value and prints its wall time, the samples simulated per second, the speed-up over one
process (ideal: the number of processes) and whether every run printed the same figures; then
one node alone (`--nodes`), its time and how its estimate of the job's egress compares.
Never asserts.

    .venv/bin/python benchmarks/plan_cost.py [--jobs 1 2] [--scale 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PER_SHARD = 50_000
SHARD_BYTES = 64 << 20
# (name, shards, nodes, cache_limit as a share of what each node reads)
CASES = [("no eviction", 2000, 128, 10.0), ("limit evicts", 200, 8, 0.375)]


def write_index(folder: Path, shards: int) -> None:
    """An MDS index of `shards` shards of PER_SHARD samples (the shard files are not needed)."""
    entries = [{"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8],
                "compression": "zstd", "format": "mds", "hashes": [], "samples": PER_SHARD,
                "size_limit": 1 << 26, "version": 2,
                "raw_data": {"basename": f"shard.{i:05d}.mds", "bytes": SHARD_BYTES},
                "zip_data": {"basename": f"shard.{i:05d}.mds.zstd", "bytes": 40 << 20}}
               for i in range(shards)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.json").write_text(json.dumps({"version": 2, "shards": entries}))


def time_plan(config: Path, limit: str, jobs: int, *extra: str) -> tuple[float, str]:
    """Seconds `streaming plan --json` took, and what it printed."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "streaming.cli", "plan", str(config), "--json",
                           "--cache-limit", limit, "--jobs", str(jobs), *extra],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    return time.perf_counter() - started, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the shard counts")
    args = parser.parse_args()
    print("streaming plan --json, 8 ranks x 8 workers per node, batch 32, one epoch")
    with tempfile.TemporaryDirectory() as tmp:
        for name, shards, nodes, share in CASES:
            shards = max(int(shards * args.scale), 1)
            limit = f"{int(share * shards / nodes * SHARD_BYTES) >> 20}mb"
            folder = Path(tmp) / f"{shards}"
            write_index(folder, shards)
            config = folder / "run.yaml"
            config.write_text(f"streams:\n  - {{local: {folder}}}\nbatch_size: 32\n"
                              f"shuffle: true\ntopology: {{nodes: {nodes}, ranks_per_node: 8, "
                              "workers_per_rank: 8}\n")
            samples = shards * PER_SHARD
            runs = {jobs: time_plan(config, limit, jobs) for jobs in args.jobs}
            one = runs[min(runs)][0]
            same = len({out for _, out in runs.values()}) == 1
            for jobs, (seconds, _) in runs.items():
                print(f"  {name:12} {samples:>12,} samples, {nodes:3} nodes, limit {limit:>8}, "
                      f"--jobs {jobs}: {seconds:7.1f} s, {samples / seconds / 1e6:5.2f}M "
                      f"samples/s, x{one / seconds:4.2f} of --jobs {min(runs)}")
            print(f"  {'':12} same figures for every --jobs: {same}")
            node = nodes // 2
            seconds, out = time_plan(config, limit, 1, "--nodes", str(node))
            whole = json.loads(runs[min(runs)][1])["egress_bytes"]
            print(f"  {'':12} --nodes {node} --jobs 1: {seconds:7.1f} s (x{one / seconds:4.2f}), "
                  f"its egress estimate x{json.loads(out)['egress_bytes'] / whole:.3f} of "
                  "the whole prediction's")


if __name__ == "__main__":
    main()
