"""`StreamingDataLoader` and what it is built from: `dataloader` (the loader and its per-worker
batch stream), `default_collate` (columns into tensors and `Ragged` batches), `worker_ring`
(batches from workers through shared memory instead of the pipe), `first_batch` (an
iteration's first batch read in the training process, the rest by the workers), `checks`
(argument checks) and `unannotated_next` (DataLoader's `__next__` without torch's per-batch
profiler annotation)."""

from __future__ import annotations

from streaming.loader.dataloader import StreamingDataLoader
from streaming.loader.default_collate import Ragged

__all__ = ["Ragged", "StreamingDataLoader"]
