"""One rank of benchmarks/node_processes.py: reads its place from the launcher variables,
iterates a StreamingDataLoader, and once every worker has delivered a batch writes --ready and
waits for --go before finishing the epoch, so the parent can measure every process at once.
Writes the samples it read and the node cache's downloads and evictions to --out (JSON)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

GO_TIMEOUT = 600.0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--remote", required=True)
    p.add_argument("--local", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--ready", required=True)
    p.add_argument("--go", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--cache-limit", type=int, default=None)
    p.add_argument("--sync", action="store_true",
                   help="all-reduce after every batch, as data-parallel training steps do")
    args = p.parse_args()

    from streaming import StreamingDataLoader, StreamingDataset

    step = None
    if args.sync:
        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        token = torch.zeros(1)

        def step() -> None:
            dist.all_reduce(token)

    ds = StreamingDataset(remote=args.remote, local=args.local, batch_size=args.batch_size,
                          shuffle=True, cache_limit=args.cache_limit)
    loader = StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
    seen = 0
    for k, batch in enumerate(loader):
        seen += len(batch["id"])
        if step is not None:
            step()
        # The training process reads batch 0 and the workers start at batch 1, taking turns:
        # after batch `workers` each of them has delivered one.
        if k == args.workers and not Path(args.ready).exists():
            Path(args.ready).write_text("ready")
            deadline = time.monotonic() + GO_TIMEOUT
            while not Path(args.go).exists():
                if time.monotonic() > deadline:
                    return 2
                time.sleep(0.05)
    stats = ds.cache_stats()
    Path(args.out).write_text(json.dumps({"samples": seen, "downloads": stats.downloads,
                                          "evictions": stats.evictions,
                                          "needed": stats.needed_evictions, "misses": stats.misses,
                                          "wait": stats.wait_seconds}))
    ds.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
