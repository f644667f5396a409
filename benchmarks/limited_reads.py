"""A cache_limit's cost on the read path, without the network: one shuffled cold-cache epoch of a
zstd corpus from a folder (the remote), with no limit and with cache_limit at 25%, in alternating
fresh processes, 0 and 2 DataLoader workers.

    .venv/bin/python benchmarks/limited_reads.py [--corpus tokens|blobs] [--size full] [--rounds 3]

Prints median wall time and CPU seconds (training process + workers), the 25% / unlimited
ratios and the limited epochs' downloads; nothing is asserted (timings vary on shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child_epoch import run

# One epoch in a fresh interpreter; argv: remote folder, workers, cache_limit ("none": no limit).
CHILD = r"""
import json, shutil, sys, tempfile
from _child_epoch import timed
from streaming import StreamingDataLoader, StreamingDataset
local = tempfile.mkdtemp()
limit = None if sys.argv[3] == "none" else int(sys.argv[3])
ds = StreamingDataset(remote=sys.argv[1], local=local, shuffle=True, batch_size=64,
                      cache_limit=limit)
result = timed(StreamingDataLoader(ds, batch_size=64, num_workers=int(sys.argv[2])))
result["downloads"] = ds.cache_stats().downloads
ds.close()
shutil.rmtree(local)
print(json.dumps(result))
"""


def epoch(folder: Path, workers: int, limit: int | None) -> dict:
    return run(CHILD, str(folder), str(workers), "none" if limit is None else str(limit))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=["tokens", "blobs"], default="tokens")
    parser.add_argument("--size", choices=["quick", "default", "full"], default="full")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import numpy as np
    from remote import build

    from streaming.format.index import read_index

    _, folder = build(args.corpus, args.size)
    index = read_index(folder / "index.json")
    limit = int(np.sum(index.raw_bytes)) // 4
    print(f"{args.corpus}: {len(index.shards)} zstd shards, cache_limit 25% = {limit:,} bytes")
    for workers in (0, 2):
        runs: dict[str, list[dict]] = {"none": [], "25%": []}
        for _ in range(args.rounds):
            runs["none"].append(epoch(folder, workers, None))
            runs["25%"].append(epoch(folder, workers, limit))
        med = {way: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")}
               for way, rs in runs.items()}
        samples = runs["none"][0]["samples"]
        print(f"{workers} workers, {samples:,} samples, medians of {args.rounds}:")
        for way, m in med.items():
            downloads = [r["downloads"] for r in runs[way]]
            print(f"  {way:<5} {m['wall']:6.2f} s  {samples / m['wall']:>9,.0f} samples/s  "
                  f"{m['cpu']:6.2f} CPU-s  downloads {downloads}")
        print(f"  25% / none: wall x{med['25%']['wall'] / med['none']['wall']:.2f}, "
              f"CPU x{med['25%']['cpu'] / med['none']['cpu']:.2f}")


if __name__ == "__main__":
    main()
