"""One rank of benchmarks/node_processes.py: reads its place from the launcher variables,
iterates a StreamingDataLoader, and after the first batch (all workers running) writes --ready
and waits for --go before finishing the epoch, so the parent can measure every process at once.
Writes the number of samples it read to --out."""

from __future__ import annotations

import argparse
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
    args = p.parse_args()

    from streaming import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(remote=args.remote, local=args.local, batch_size=args.batch_size,
                          shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
    seen = 0
    for batch in loader:
        seen += len(batch["id"])
        if not Path(args.ready).exists():
            Path(args.ready).write_text("ready")
            deadline = time.monotonic() + GO_TIMEOUT
            while not Path(args.go).exists():
                if time.monotonic() > deadline:
                    return 2
                time.sleep(0.05)
    Path(args.out).write_text(str(seen))
    ds.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
