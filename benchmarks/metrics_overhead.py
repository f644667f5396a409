"""Loader metrics cost: samples/s of the same StreamingDataLoader epoch with metrics on and off,
in one run, as a ratio (on / off); batches of 16, 64 and 256, 0 and 2 workers. Both per second
of wall time and per CPU second of the training process (where the metrics run; on a busy
machine the CPU figure is the steadier of the two).

    .venv/bin/python benchmarks/metrics_overhead.py [--rounds 40] [--samples 40000] [--batch 16 64]

Each round runs one epoch with metrics and one without, in the order off-on, then on-off in the
next round (so a drift of the machine's speed cancels), and keeps the ratio of the pair. The
median ratio over the rounds is printed with a 95% bootstrap interval of that median: the
resolution of the run. From the CPU ratio and a batch's CPU time follows what metrics add to
each batch, in nanoseconds: the figure that says which loops they are within 1% of.

Small samples (about 50 bytes) and small batches make the per-batch cost of the metrics as
large a share of the step as it can be. Prints only; nothing is asserted (timings vary on
shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from _stats import median_interval  # noqa: E402


def write(folder: Path, samples: int) -> None:
    from writers.mds import MDSWriter

    with MDSWriter(columns={"id": "int", "text": "str"}, out=str(folder),
                   size_limit=1 << 20) as w:
        for i in range(samples):
            w.write({"id": i, "text": f"sample {i} " * 4})


def epoch(loader, metrics: bool) -> tuple[float, float]:
    """Samples per wall second and per CPU second of this process, over one epoch."""
    loader.collect_metrics = metrics
    start, cpu, n = time.perf_counter(), time.process_time(), 0
    for batch in loader:
        n += len(batch["id"])
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def run(folder: Path, workers: int, rounds: int, batch: int) -> None:
    from streaming import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(local=str(folder), batch_size=batch, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=batch, num_workers=workers,
                                 persistent_workers=workers > 0)
    epoch(loader, False)  # warm the page cache and the workers
    pairs = []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {metrics: epoch(loader, metrics) for metrics in order}
        pairs.append((got[False], got[True]))
    ds.close()
    row = f"{batch:>5}  {workers:>7}"
    for k in (0, 1):
        off = statistics.median(p[0][k] for p in pairs)
        mid, low, high = median_interval([p[1][k] / p[0][k] for p in pairs])
        row += f"  {off:>10.0f}  {mid:>8.4f} [{low:.4f}, {high:.4f}]"
    per_batch_s = batch / statistics.median(p[0][1] for p in pairs)
    cpu_ratio = median_interval([p[1][1] / p[0][1] for p in pairs])[0]
    cost_ns = per_batch_s * (1 / cpu_ratio - 1) * 1e9
    print(f"{row}  {per_batch_s * 1e6:>8.1f}  {cost_ns:>8.0f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=40, help="pairs of epochs (on, off)")
    p.add_argument("--samples", type=int, default=40_000)
    p.add_argument("--batch", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp) / "ds", args.samples)
        print(f"{args.samples} samples, {args.rounds} pairs of epochs; samples/s with metrics "
              "off (median), on / off (median of the pairs' ratios, [95% interval]); a batch's "
              "CPU time in the training process with metrics off (us) and what metrics add to "
              "it (ns, from the CPU ratio)")
        print(f"{'batch':>5}  {'workers':>7}  {'wall: off':>10}  {'on / off':>26}  "
              f"{'cpu: off':>10}  {'on / off':>26}  {'batch us':>8}  {'cost ns':>8}")
        for batch in args.batch:
            for workers in args.workers:
                run(Path(tmp) / "ds", workers, args.rounds, batch)


if __name__ == "__main__":
    main()
