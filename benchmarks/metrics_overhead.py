"""Loader metrics cost: samples/s of the same StreamingDataLoader epoch with metrics on and off,
alternated in one run, as a ratio (on / off); 0 and 2 workers. Both per second of wall time and
per CPU second of the training process (where the metrics run; on a busy machine the CPU
figure is the steadier of the two).

    .venv/bin/python benchmarks/metrics_overhead.py [--rounds 8] [--samples 40000]

Small samples and small batches make the per-batch cost of the metrics as large a share of
the step as it can be. Prints only; nothing is asserted (timings vary on shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8, help="epochs with and without, alternated")
    p.add_argument("--samples", type=int, default=40_000)
    p.add_argument("--batch", type=int, default=16)
    args = p.parse_args()
    from streaming import StreamingDataLoader, StreamingDataset

    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp) / "ds", args.samples)
        print(f"{args.samples} samples, batch {args.batch}, {args.rounds} epochs each, "
              "alternated; median samples/s")
        print(f"{'workers':>7}  {'wall: off':>10}  {'on':>8}  {'on / off':>8}  "
              f"{'cpu: off':>10}  {'on':>8}  {'on / off':>8}")
        for workers in (0, 2):
            ds = StreamingDataset(local=str(Path(tmp) / "ds"), batch_size=args.batch,
                                  shuffle=True)
            loader = StreamingDataLoader(ds, batch_size=args.batch, num_workers=workers,
                                         persistent_workers=workers > 0)
            epoch(loader, False)  # warm the page cache and the workers
            on, off = [], []
            for r in range(args.rounds):
                first, second = (on, off) if r % 2 else (off, on)
                first.append(epoch(loader, first is on))
                second.append(epoch(loader, second is on))
            row = f"{workers:>7}"
            for k in (0, 1):
                a = statistics.median(x[k] for x in off)
                b = statistics.median(x[k] for x in on)
                row += f"  {a:>10.0f}  {b:>8.0f}  {b / a:>8.3f}"
            print(row)
            ds.close()


if __name__ == "__main__":
    main()
