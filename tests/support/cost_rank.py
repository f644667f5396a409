"""One rank of a job that measures what a node's cache downloads, started through
`tests.support.jobs.ForkedJob` by tests/cli/test_plan_cost.py (the cost prediction against real
S3 jobs) and tests/cache/engine/test_egress_methods.py (a node's ranks against the floor, the
Belady optimum and the prediction): joins a gloo group from torch.distributed's variables, reads
`--epochs` epochs of the `--remote` streams through a StreamingDataLoader into the node's cache
`<local-root>/node<n>` (one remote: that folder; several: a subfolder per stream named after
the remote's last part), ranks stepping together, as in data-parallel training (with `--drift`
the odd local ranks lag and the ranks meet every `--sync-every` batches, or only at the end
with `--sync-every 0`), and, once every rank is done, the node's first rank writes the node's
cache_stats() as JSON to `<out-dir>/node<n>.json`, with the samples the whole job read, the
plan settings the dataset fitted to the limit, and at the end of each epoch (every rank done
with it, none started on the next) the bytes the node had downloaded so far and the shards its
cache held."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--remote", required=True, nargs="+")
    for name in ("--local-root", "--out-dir", "--cache-limit"):
        p.add_argument(name, required=True)
    p.add_argument("--proportion", type=float, nargs="+", default=None,
                   help="each stream's proportion (one per --remote)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--predownload", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shuffle-seed", type=int, default=7)
    p.add_argument("--shuffle-algo", default="py1e")
    p.add_argument("--batching-method", default="random")
    p.add_argument("--epoch-size", type=int, default=None)
    p.add_argument("--drift", type=float, default=0.0,
                   help="seconds the node's odd local ranks sleep after each batch; the ranks "
                        "then meet only every --sync-every batches (they drift apart between "
                        "synchronisations, as with gradient accumulation; 0: they never meet "
                        "before the end)")
    p.add_argument("--sync-every", type=int, default=8)
    args = p.parse_args()
    import numpy as np
    import torch
    import torch.distributed as dist

    from streaming import Stream, StreamingDataLoader, StreamingDataset
    from streaming.cache.table.node_table import PRESENT

    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=90))
    node = dist.get_rank() // int(os.environ["LOCAL_WORLD_SIZE"])
    local = Path(args.local_root) / f"node{node}"
    if len(args.remote) == 1 and args.proportion is None:
        where = {"remote": args.remote[0], "local": str(local)}
    else:
        shares = args.proportion or [None] * len(args.remote)
        where = {"streams": [Stream(remote=remote, local=str(local / Path(remote).name),
                                    proportion=share)
                             for remote, share in zip(args.remote, shares, strict=True)]}
    ds = StreamingDataset(**where, cache_limit=int(args.cache_limit), batch_size=args.batch_size,
                          predownload=args.predownload, shuffle=True,
                          shuffle_seed=args.shuffle_seed, shuffle_algo=args.shuffle_algo,
                          batching_method=args.batching_method, epoch_size=args.epoch_size)
    loader = StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
    lagging = args.drift and int(os.environ["LOCAL_RANK"]) % 2 == 1
    read = 0
    ends = []  # at the end of each epoch: the node's bytes downloaded so far, the shards held
    for _ in range(args.epochs):
        for step, batch in enumerate(loader):
            read += len(batch["id"])
            if lagging:
                time.sleep(args.drift)
            if not args.drift or (args.sync_every
                                  and step % args.sync_every == args.sync_every - 1):
                dist.barrier()  # ranks step together, as gradient all-reduces make them
        dist.barrier()
        if int(os.environ["LOCAL_RANK"]) == 0:
            held = np.flatnonzero(ds.cache.table.state == PRESENT)
            ends.append({"bytes_downloaded": ds.cache_stats().bytes_downloaded,
                         "held": held.tolist()})
        dist.barrier()  # no rank starts the next epoch before the snapshot
    total = torch.tensor([read], dtype=torch.int64)
    dist.all_reduce(total)
    if int(os.environ["LOCAL_RANK"]) == 0:
        out = Path(args.out_dir) / f"node{node}.json"
        plan = {"fingerprint": ds.config.fingerprint(),
                "shuffle_block_size": ds.config.shuffle_block_size,
                "num_canonical_nodes": ds.config.num_canonical_nodes}
        out.write_text(json.dumps({**ds.cache_stats().as_dict(),
                                   "drift_steps": ds.cache.drift.steps,
                                   "job_samples_read": int(total.item()), "plan": plan,
                                   "epochs": ends}))
    dist.barrier()
    ds.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
