"""`StreamingDataLoader` and what it is built from: `dataloader` (the loader and its per-worker
batch stream), `collate` (columns into tensors and `Ragged` batches), `worker_ring` (batches from
workers through shared memory instead of the pipe), `checks` (argument checks) and
`unannotated_next` (DataLoader's `__next__` without torch's per-batch profiler annotation)."""

from __future__ import annotations

from streaming.loader.collate import Ragged
from streaming.loader.dataloader import StreamingDataLoader

__all__ = ["Ragged", "StreamingDataLoader"]
