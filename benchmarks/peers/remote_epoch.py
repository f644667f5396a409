"""The timed loop every system runs in benchmarks/remote.py: one epoch through a DataLoader.

Library-agnostic and stdlib-only, so each system's child script (ours, the reference, LitData)
imports it from its own venv. The child prints `progress` lines while it runs and one `result`
line at the end, so the parent can tell a stall (progress stopped) from slow progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

PROGRESS_EVERY = 0.5  # seconds between progress lines


def folder_bytes(root: str) -> int:
    """Bytes allocated under `root` (what a cache really occupies on disk)."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):  # evicted between listing and stat
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


class DiskWatch:
    """Peak size of a cache folder, sampled at most every `every` seconds from the loop itself
    (no thread: a thread alive when the DataLoader forks its workers could hold a lock)."""

    def __init__(self, root: str, every: float = 0.05) -> None:
        self.root, self.every, self.peak, self.last = root, every, 0, 0.0

    def poll(self, now: float) -> None:
        if now - self.last >= self.every:
            self.peak = max(self.peak, folder_bytes(self.root))
            self.last = now


def emit(kind: str, **fields: Any) -> None:
    """One JSON line on stdout, flushed at once (the parent reads it while we run)."""
    sys.stdout.write(json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


def timed_epoch(start: float, loader: Iterable, count: Callable[[Any], tuple[int, int]],
                cache_dir: str, notes: list[str] | None = None,
                marks: dict[str, float] | None = None) -> None:
    """Iterate `loader` once, emitting progress and then the result (samples, payload bytes,
    seconds, time to first batch, peak cache bytes) measured from `start`; `ready` is the
    start-up before iteration (imports, building the dataset and loader). `marks`: moments
    (seconds from `start`) the loader recorded while it ran, reported as they are."""
    ready = time.perf_counter() - start
    watch = DiskWatch(cache_dir)
    samples = payload = 0
    first = None
    last = time.perf_counter()
    for batch in loader:
        now = time.perf_counter()
        if first is None:
            first = now - start
        watch.poll(now)
        k, b = count(batch)
        samples += k
        payload += b
        if now - last > PROGRESS_EVERY:
            emit("progress", samples=samples, seconds=now - start)
            last = now
    seconds = time.perf_counter() - start
    peak = max(watch.peak, folder_bytes(cache_dir))
    emit("result", samples=samples, bytes=payload, seconds=seconds, first=first, ready=ready,
         peak_cache=peak, notes=notes or [], marks=marks or {})


def nbytes(value: Any) -> int:
    """Payload size of one column value (array, tensor or bytes)."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    return len(value)


def count_list(column: str) -> Callable[[list[dict]], tuple[int, int]]:
    """Counter for batches that are plain lists of sample dicts (the peers' collate)."""

    def count(batch: list[dict]) -> tuple[int, int]:
        return len(batch), sum(nbytes(sample[column]) for sample in batch)

    return count


def args() -> dict:
    """The child's arguments: one JSON object in argv[1]."""
    return json.loads(sys.argv[1])
