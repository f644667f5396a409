"""One rank of the cost-prediction job (tests/cli/test_plan_cost.py): joins a gloo group from
torch.distributed's variables, reads `--epochs` epochs of an S3 dataset through a
StreamingDataLoader into the node's cache `<local-root>/node<n>` (ranks stepping together,
as in data-parallel training; with `--drift` the odd local ranks lag and the ranks meet
every `--sync-every` batches, or only at the end with `--sync-every 0`), and, once every rank
is done, the node's first rank writes the node's cache_stats() as JSON to
`<out-dir>/node<n>.json`."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("--remote", "--local-root", "--out-dir", "--cache-limit"):
        p.add_argument(name, required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--predownload", type=int, default=64)
    p.add_argument("--drift", type=float, default=0.0,
                   help="seconds the node's odd local ranks sleep after each batch; the ranks "
                        "then meet only every --sync-every batches (they drift apart between "
                        "synchronisations, as with gradient accumulation; 0: they never meet "
                        "before the end)")
    p.add_argument("--sync-every", type=int, default=8)
    args = p.parse_args()
    import torch.distributed as dist

    from streaming import StreamingDataLoader, StreamingDataset

    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=90))
    node = dist.get_rank() // int(os.environ["LOCAL_WORLD_SIZE"])
    ds = StreamingDataset(remote=args.remote, local=str(Path(args.local_root) / f"node{node}"),
                          cache_limit=int(args.cache_limit), batch_size=args.batch_size,
                          predownload=args.predownload, shuffle=True, shuffle_seed=7)
    loader = StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=2)
    import time

    lagging = args.drift and int(os.environ["LOCAL_RANK"]) % 2 == 1
    for _ in range(args.epochs):
        for step, _batch in enumerate(loader):
            if lagging:
                time.sleep(args.drift)
            if not args.drift or (args.sync_every
                                  and step % args.sync_every == args.sync_every - 1):
                dist.barrier()  # ranks step together, as gradient all-reduces make them
    dist.barrier()
    if int(os.environ["LOCAL_RANK"]) == 0:
        out = Path(args.out_dir) / f"node{node}.json"
        out.write_text(json.dumps({**ds.cache_stats().as_dict(),
                                   "drift_steps": ds.cache.drift.steps}))
    dist.barrier()
    ds.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
