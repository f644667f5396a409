"""Settle a DataLoader worker process once, when it starts iterating a StreamingDataset; and the
training process, once, when it reads samples itself (no DataLoader workers).

- Keep its garbage collector off the objects it inherited. A worker starts as a copy of the
  training process, often with torch's hundreds of thousands of Python objects. Every full
  collection in the worker walks all of them (a pause in the batch stream) and writes to their
  headers, which copies the parent's pages into the worker. Inherited objects live as long as
  the worker anyway, so moving them into the permanent generation once (`gc.freeze`) loses
  nothing; objects the worker creates afterwards are collected as usual. Setting the
  environment variable STREAMING_GC_FREEZE=0 leaves the worker's collector alone.
- Let its allocator reuse freed buffers (`streaming.util.malloc.WORKER`).
- End it within a second of its training process dying (`streaming.util.orphan`).
- Let its training process ask where its threads are (`streaming.coord.worker_stacks`).

The training process's collector is left alone: there, freezing would keep the user's future
garbage cycles from ever being collected. Its allocator is tuned only once it reads samples
itself (`streaming.util.malloc.IN_PROCESS`: each value it hands out is a new object, and with
glibc's defaults most of them land on freshly faulted pages); `MALLOC_*_` settings in the
environment keep glibc as the user configured it, there as in workers.
"""

from __future__ import annotations

import gc
import os

from streaming.coord.worker_stacks import arm_worker
from streaming.coord.world_detect import in_worker
from streaming.util.malloc import IN_PROCESS, WORKER, keep_buffers_in_heap
from streaming.util.orphan import watch_parent

GC_FREEZE_ENV = "STREAMING_GC_FREEZE"  # "0" (or "false", "no", "off"): no gc.freeze()

_settled_pid: int | None = None
_reader_pid: int | None = None  # the training process, once it read samples itself


def freeze_enabled() -> bool:
    """Whether settling a worker freezes its inherited objects (STREAMING_GC_FREEZE, default on)."""
    return os.environ.get(GC_FREEZE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def settle_worker() -> bool:
    """In a DataLoader worker process, once per process: freeze every object alive now (unless
    STREAMING_GC_FREEZE=0) and tune malloc (True when it did). Elsewhere it does nothing."""
    global _settled_pid
    if _settled_pid == os.getpid():
        return False
    if not in_worker():
        return False
    _settled_pid = os.getpid()
    watch_parent()
    arm_worker()
    if freeze_enabled():
        gc.freeze()
    keep_buffers_in_heap(WORKER)
    return True


def settle_process() -> None:
    """Settle this process as it starts an iteration: a DataLoader worker as `settle_worker`
    does, the training process reading its samples itself as `settle_reading_process` does
    (each once per process)."""
    if in_worker():
        settle_worker()
    else:
        settle_reading_process()


def settle_reading_process() -> bool:
    """In the training process, once per process, when it reads samples itself (not in a
    DataLoader worker): tune malloc for the values it makes (True when it did)."""
    global _reader_pid
    if _reader_pid == os.getpid():
        return False
    if in_worker():
        return False
    _reader_pid = os.getpid()
    return keep_buffers_in_heap(IN_PROCESS)
