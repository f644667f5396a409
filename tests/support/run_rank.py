"""One rank of a simulated training job (launched by tests/support/jobs.py).

Reads its topology from RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT,
joins a gloo process group (unless --no-dist: then the dataset finds its place from those
variables alone), iterates a StreamingDataset through a StreamingDataLoader and writes
one JSON line per batch (the `id` column of its samples) to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time
from pathlib import Path


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--sources", nargs="+", required=True)
    p.add_argument("--local-root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--batching", default="random")
    p.add_argument("--proportions", type=float, nargs="*")
    p.add_argument("--stop-after", type=int, default=None, help="batches, then save state")
    p.add_argument("--resume", default=None, help="state JSON file to load first")
    p.add_argument("--kill-worker-after", type=int, default=None)
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--no-dist", action="store_true", help="no torch.distributed process group")
    return p.parse_args()


def main() -> int:
    args = _parse()
    import torch.distributed as dist

    from streaming import Stream, StreamingDataLoader, StreamingDataset

    if not args.no_dist:
        dist.init_process_group("gloo", init_method="env://",
                                timeout=datetime.timedelta(seconds=60))
    rank = int(os.environ["RANK"])
    node = rank // int(os.environ["LOCAL_WORLD_SIZE"])
    streams = [
        Stream(remote=src, local=str(Path(args.local_root) / f"node{node}" / f"s{i}"),
               proportion=args.proportions[i] if args.proportions else None)
        for i, src in enumerate(args.sources)
    ]
    ds = StreamingDataset(streams=streams, batch_size=args.batch_size, shuffle=args.shuffle,
                          batching_method=args.batching)
    loader = StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=args.workers,
                                 persistent_workers=args.persistent and args.workers > 0)
    if args.resume:
        loader.load_state_dict(json.loads(Path(args.resume).read_text()))
    if not args.no_dist:
        dist.barrier()
    with open(args.out, "w") as out:
        out.write(json.dumps({"len": len(ds), "rank": rank}) + "\n")
        try:
            _train(args, loader, out)
        except Exception as exc:  # reported to ForkedJob, which checks the message
            record = {"error": f"{type(exc).__name__}: {exc}", "t": time.time()}
            out.write(json.dumps(record) + "\n")
            return 3
    return 0


def _train(args: argparse.Namespace, loader, out) -> None:
    seen = 0
    for epoch in range(args.epochs):
        for batch in loader:
            out.write(json.dumps({"epoch": epoch, "ids": batch["id"].tolist()}) + "\n")
            out.flush()
            seen += 1
            if args.kill_worker_after is not None and seen == args.kill_worker_after:
                out.write(json.dumps({"killed": time.time()}) + "\n")
                _kill_a_worker()
            if args.stop_after is not None and seen == args.stop_after:
                out.write(json.dumps({"state": loader.state_dict()}) + "\n")
                return


def _kill_a_worker() -> None:
    """SIGKILL the first DataLoader worker process of the current iterator."""
    import multiprocessing

    for child in multiprocessing.active_children():
        os.kill(child.pid, signal.SIGKILL)
        return


if __name__ == "__main__":
    sys.exit(main())
