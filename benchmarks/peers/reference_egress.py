"""One epoch of mosaicml-streaming 0.13 under a cache_limit, counting the bytes it downloads,
for benchmarks/cache_egress.py.

Runs inside the reference's venv (its import name `streaming` is ours too):

    .venv-reference/bin/python benchmarks/peers/reference_egress.py '{"streams": ...}'

Every shard file its streams fetch is counted by wrapping the reference's per-file download
(`Stream._download_file`) in this process before the DataLoader forks its workers: each fetch
appends its size to a log file, which the parent sums at the end. Prints one JSON line:
{"bytes": ..., "downloads": ..., "seconds": ..., "samples": ...}.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_import import reference_streaming_dataset


def _count_downloads(log: str) -> None:
    """Wrap the reference's per-file download so every fetched shard file's size is logged."""
    from streaming.base.stream import Stream

    fetch = Stream._download_file

    def counted(self, from_basename: str, to_basename: str | None = None) -> str:
        path = fetch(self, from_basename, to_basename)
        if not from_basename.endswith("index.json"):
            line = f"{os.path.getsize(path)}\n".encode()
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        return path

    Stream._download_file = counted


def main() -> None:
    a = json.loads(sys.argv[1])
    import torch

    StreamingDataset = reference_streaming_dataset()
    from streaming.base import Stream

    log = tempfile.mktemp(prefix="reference-egress-")
    _count_downloads(log)
    streams = [Stream(remote=s["remote"], local=s["local"], proportion=s.get("proportion"))
               for s in a["streams"]]
    start = time.perf_counter()
    ds = StreamingDataset(streams=streams, epoch_size=a.get("epoch_size"), shuffle=True,
                          batch_size=a["batch"], cache_limit=a["limit"])
    loader = torch.utils.data.DataLoader(ds, batch_size=a["batch"], num_workers=a["workers"],
                                         collate_fn=lambda b: b)
    samples = sum(len(batch) for batch in loader)
    seconds = time.perf_counter() - start
    sizes = [int(x) for x in Path(log).read_text().split()] if os.path.exists(log) else []
    if os.path.exists(log):
        os.unlink(log)
    print(json.dumps({"bytes": sum(sizes), "downloads": len(sizes), "seconds": seconds,
                      "samples": samples}))


if __name__ == "__main__":
    main()
