"""Settle a DataLoader worker process once, when it starts iterating a StreamingDataset.

- Keep its garbage collector off the objects it inherited. A worker starts as a copy of the
  training process, often with torch's hundreds of thousands of Python objects. Every full
  collection in the worker walks all of them (a pause in the batch stream) and writes to their
  headers, which copies the parent's pages into the worker. Inherited objects live as long as
  the worker anyway, so moving them into the permanent generation once (`gc.freeze`) loses
  nothing; objects the worker creates afterwards are collected as usual. Setting the
  environment variable STREAMING_GC_FREEZE=0 leaves the worker's collector alone.
- Let its allocator reuse freed buffers (`streaming.util.malloc`).
- End it within a second of its training process dying (`streaming.util.orphan`).
- Let its training process ask where its threads are (`streaming.coord.worker_stacks`).

The training process itself is left alone: there, freezing would keep the user's future garbage
cycles from ever being collected, and its allocator is the user's to tune.
"""

from __future__ import annotations

import gc
import os

from streaming.coord.worker_stacks import arm_worker
from streaming.util.malloc import keep_buffers_in_heap
from streaming.util.orphan import watch_parent

GC_FREEZE_ENV = "STREAMING_GC_FREEZE"  # "0" (or "false", "no", "off"): no gc.freeze()

_settled_pid: int | None = None


def freeze_enabled() -> bool:
    """Whether settling a worker freezes its inherited objects (STREAMING_GC_FREEZE, default on)."""
    return os.environ.get(GC_FREEZE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def settle_worker() -> bool:
    """In a DataLoader worker process, once per process: freeze every object alive now (unless
    STREAMING_GC_FREEZE=0) and tune malloc (True when it did). Elsewhere it does nothing."""
    global _settled_pid
    if _settled_pid == os.getpid():
        return False
    from streaming.coord.world_detect import in_worker

    if not in_worker():
        return False
    _settled_pid = os.getpid()
    watch_parent()
    arm_worker()
    if freeze_enabled():
        gc.freeze()
    keep_buffers_in_heap()
    return True
