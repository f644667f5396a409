"""Chunk reads from the page cache in the iterating thread (RWF_NOWAIT) against always handing
them to the reader thread: one shuffled epoch of the token corpus (raw MDS shards, already in
the page cache), 0 and 2 DataLoader workers, the two ways in alternating runs.

    .venv/bin/python benchmarks/page_reads.py [--quick] [--rounds 5]

Prints the median wall time and CPU seconds (training process + workers) of each way and their
ratios; nothing is asserted (timings vary on shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child_epoch import run

# One epoch in a fresh interpreter; argv: folder, workers, "thread" to send every read to the
# reader thread (the behaviour before in-thread page-cache reads).
CHILD = r"""
import json, sys
import streaming.read.iterate
from _child_epoch import timed
if sys.argv[3] == "thread":
    streaming.read.iterate.NOWAIT_READS = False
from streaming import StreamingDataLoader, StreamingDataset
ds = StreamingDataset(local=sys.argv[1], shuffle=True, batch_size=64)
result = timed(StreamingDataLoader(ds, batch_size=64, num_workers=int(sys.argv[2])))
ds.close()
print(json.dumps(result))
"""


def epoch(folder: Path, workers: int, way: str) -> dict:
    return run(CHILD, str(folder), str(workers), way)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 samples instead of 250,000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from iterate import prepare

    _, folder, _, _ = prepare("tokens", args.quick)
    epoch(folder, 0, "nowait")  # brings the shards into the page cache
    for workers in (0, 2):
        runs: dict[str, list[dict]] = {"nowait": [], "thread": []}
        for _ in range(args.rounds):
            for way in runs:
                runs[way].append(epoch(folder, workers, way))
        med = {way: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")}
               for way, rs in runs.items()}
        samples = runs["nowait"][0]["samples"]
        print(f"{workers} workers, {samples:,} samples, medians of {args.rounds}:")
        for way, m in med.items():
            print(f"  {way:<7} {m['wall']:6.2f} s  {samples / m['wall']:>9,.0f} samples/s  "
                  f"{m['cpu']:6.2f} CPU-s")
        print(f"  in-thread / thread: wall x{med['nowait']['wall'] / med['thread']['wall']:.2f}, "
              f"CPU x{med['nowait']['cpu'] / med['thread']['cpu']:.2f}")


if __name__ == "__main__":
    main()
