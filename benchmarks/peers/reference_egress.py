"""One epoch of mosaicml-streaming 0.13 under a cache_limit, counting the bytes it downloads,
for benchmarks/cache_egress.py.

Runs inside the reference's venv (its import name `streaming` is ours too):

    .venv-reference/bin/python benchmarks/peers/reference_egress.py '{"streams": ...}'

Every shard file its streams fetch is counted by wrapping the reference's per-file download
(`Stream._download_file`) in this process before the DataLoader forks its workers: each fetch
appends its size to a log file (`"log"` in the spec, else a temporary file), and the samples
delivered so far are kept in `"progress"` after every batch, so a caller that stops the epoch at
a deadline still reads what it downloaded until then. SIGTERM ends the epoch like Ctrl-C (the
loader's workers shut down). Prints one JSON line at the end:
{"bytes": ..., "downloads": ..., "seconds": ..., "samples": ...}.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_import import reference_streaming_dataset


def _append(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _count_downloads(log: str) -> None:
    """Wrap the reference's per-file download so every fetched shard file's size is logged."""
    from streaming.base.stream import Stream

    fetch = Stream._download_file

    def counted(self, from_basename: str, to_basename: str | None = None) -> str:
        path = fetch(self, from_basename, to_basename)
        if not from_basename.endswith("index.json"):
            _append(log, f"{os.path.getsize(path)}\n")
        return path

    Stream._download_file = counted


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    a = json.loads(sys.argv[1])
    import torch

    StreamingDataset = reference_streaming_dataset()
    from streaming.base import Stream

    log = a.get("log") or tempfile.mktemp(prefix="reference-egress-")
    progress = a.get("progress")
    _count_downloads(log)
    streams = [Stream(remote=s["remote"], local=s["local"], proportion=s.get("proportion"))
               for s in a["streams"]]
    start = time.perf_counter()
    ds = StreamingDataset(streams=streams, epoch_size=a.get("epoch_size"), shuffle=True,
                          shuffle_algo=a.get("shuffle_algo", "py1e"), batch_size=a["batch"],
                          cache_limit=a["limit"])
    loader = torch.utils.data.DataLoader(ds, batch_size=a["batch"], num_workers=a["workers"],
                                         collate_fn=lambda b: b)
    signal.signal(signal.SIGTERM, _stop)
    samples = 0
    for batch in loader:
        samples += len(batch)
        if progress:
            _append(progress, f"{samples}\n")
    seconds = time.perf_counter() - start
    sizes = [int(x) for x in Path(log).read_text().split()] if os.path.exists(log) else []
    if os.path.exists(log) and not a.get("log"):
        os.unlink(log)
    print(json.dumps({"bytes": sum(sizes), "downloads": len(sizes), "seconds": seconds,
                      "samples": samples}))


if __name__ == "__main__":
    main()
