"""Loader metrics: what a training process's data path did so far, as a flat dict of floats.

The hot path (once per batch) reads the clock twice and adds integers; everything else (rates,
per-stream counts from the plan, the cache's counters) is computed when `metrics()` is asked.
Key names are documented in docs/dataset.md ("Watching a run").
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.context
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from streaming.coord.world_detect import worker_slot
from streaming.errors import ArgumentError
from streaming.observe.counters import CacheCounted, PlannedStreams, ReadCounted, ReadTotals

log = logging.getLogger("streaming.metrics")

RECENT_S = 5.0  # the least span of the "recent" figures, in seconds
EVERY_ENV = "STREAMING_METRICS_EVERY"


def every_from_env() -> int:
    """Steps between logged summaries from STREAMING_METRICS_EVERY (0: never)."""
    value = os.environ.get(EVERY_ENV, "").strip()
    if not value:
        return 0
    try:
        every = int(value)
    except ValueError:
        raise ArgumentError(f"{EVERY_ENV}={value!r} is not a whole number of steps") from None
    return max(every, 0)


class Meter:
    """Steps (batches, or reads of a directly iterated dataset), samples and the time the
    training loop spent blocked waiting for them, since the first `start()`.

    A step is counted by `step`, or several at once by `add` (a loop that counts its steps
    itself and hands them over when metrics are read). The recent figures run from a snapshot
    to now: the meter keeps one whenever it is told something at least `recent_s` after the
    previous one, and the recent figures start at the newest snapshot at least `recent_s` old
    (at the start before then). So they span `recent_s` to twice that when the meter is told
    often, and the time since the reading before when it is told less often.

    Args:
        recent_s: the least span of the recent figures, in seconds.
    """

    def __init__(self, recent_s: float = RECENT_S) -> None:
        self.recent_ns = max(int(recent_s * 1e9), 1)
        self.started_ns = 0
        self.first_ns = 0
        self.steps = 0
        self.samples = 0
        self.wait_ns = 0
        self._marks: list[tuple[int, int, int, int]] = []  # (time, steps, samples, wait)

    def start(self) -> None:
        """Mark the start of iteration (only the first call counts)."""
        if not self.started_ns:
            self.started_ns = time.perf_counter_ns()
            self._marks = [(self.started_ns, 0, 0, 0)]

    def step(self, wait_ns: int, samples: int, now_ns: int) -> None:
        """Record one step that kept the loop waiting `wait_ns` and delivered `samples` at
        `now_ns` (time.perf_counter_ns)."""
        self.add(1, samples, wait_ns, now_ns)

    def add(self, steps: int, samples: int, wait_ns: int, now_ns: int) -> None:
        """Record `steps` steps that delivered `samples` and kept the loop waiting `wait_ns`
        in all, the last of them at `now_ns`."""
        if not self.started_ns:
            self.start()
        if not self.first_ns and steps:
            self.first_ns = now_ns
        self.steps += steps
        self.samples += samples
        self.wait_ns += wait_ns
        if now_ns - self._marks[-1][0] >= self.recent_ns:
            self._marks = [self._marks[-1], (now_ns, self.steps, self.samples, self.wait_ns)]

    def as_dict(self, now_ns: int | None = None) -> dict[str, float]:
        """The meter's figures at `now_ns` (time.perf_counter_ns; now by default), zeros
        before the first step."""
        out = {"first_batch_s": 0.0, "batches": float(self.steps), "samples": float(self.samples),
               "elapsed_s": 0.0, "batches_per_s": 0.0, "samples_per_s": 0.0,
               "recent_batches_per_s": 0.0, "recent_samples_per_s": 0.0,
               "data_wait_s": self.wait_ns / 1e9, "recent_data_wait_s": 0.0,
               "data_wait_fraction": 0.0}
        if not self.steps:
            return out
        now = time.perf_counter_ns() if now_ns is None else now_ns
        elapsed = max(now - self.started_ns, 1) / 1e9
        out["first_batch_s"] = (self.first_ns - self.started_ns) / 1e9
        out["elapsed_s"] = elapsed
        out["batches_per_s"] = self.steps / elapsed
        out["samples_per_s"] = self.samples / elapsed
        out["data_wait_fraction"] = min(self.wait_ns / 1e9 / elapsed, 1.0)
        old_enough = [m for m in self._marks if now - m[0] >= self.recent_ns]
        then, steps, samples, wait = old_enough[-1] if old_enough else self._marks[0]
        span = max(now - then, 1) / 1e9
        if self.steps > steps:
            out["recent_batches_per_s"] = (self.steps - steps) / span
            out["recent_samples_per_s"] = (self.samples - samples) / span
            out["recent_data_wait_s"] = (self.wait_ns - wait) / 1e9 / (self.steps - steps)
        return out


class StreamCounts:
    """Samples delivered per stream, from the plan: the streams of the planned ids the loop
    consumed, in the order it consumes them (no per-sample work on the hot path).

    Args:
        stream_offsets: first global sample id of each stream (and the total at the end).
        names: each stream's key in the metrics.
        targets: each stream's share of an epoch as the mix asks for it.
    """

    def __init__(self, stream_offsets: np.ndarray, names: Sequence[str],
                 targets: np.ndarray) -> None:
        self.offsets = np.asarray(stream_offsets, np.int64)
        self.names, self.targets = list(names), np.asarray(targets, float)
        self.done = np.zeros(len(self.names), np.int64)
        self._ids: np.ndarray | Callable[[], np.ndarray] | None = None
        self._base = 0  # consumed samples counted when the current iteration began
        self._ended: list[tuple[Callable[[], np.ndarray], int]] = []  # (ids, samples) to count

    def begin(self, ids: np.ndarray | Callable[[], np.ndarray], consumed: int) -> None:
        """A new iteration reads `ids` from `consumed`: planned ids the iteration holds anyway,
        counted when it ends, or a callable that plans them again, asked only when counts are
        wanted (an ended iteration then keeps no plan alive either way)."""
        self.fold(consumed)
        self._ids, self._base = ids, consumed

    def fold(self, consumed: int) -> None:
        """The current iteration ended at `consumed` samples."""
        ids, taken = self._ids, consumed - self._base
        if isinstance(ids, np.ndarray):
            self.done += self._count(ids, taken)
        elif ids is not None:
            self._ended.append((ids, taken))
        self._ids, self._base = None, consumed

    def _count(self, ids: np.ndarray | Callable[[], np.ndarray], taken: int) -> np.ndarray:
        planned = np.asarray(ids if isinstance(ids, np.ndarray) else ids(), np.int64)
        planned = planned[planned >= 0][:max(taken, 0)]
        streams = np.searchsorted(self.offsets, planned, side="right") - 1
        return np.bincount(streams, minlength=len(self.names))[:len(self.names)]

    def as_dict(self, consumed: int) -> dict[str, float]:
        """`stream/<name>/samples`, `.../share` (of samples so far) and `.../target_share`."""
        for ids, taken in self._ended:
            self.done += self._count(ids, taken)
        self._ended.clear()
        counts = self.done.copy()
        if self._ids is not None:
            counts += self._count(self._ids, consumed - self._base)
        total = max(int(counts.sum()), 1)
        out: dict[str, float] = {}
        for name, count, target in zip(self.names, counts.tolist(), self.targets.tolist()):
            out[f"stream/{name}/samples"] = float(count)
            out[f"stream/{name}/share"] = count / total
            out[f"stream/{name}/target_share"] = float(target)
        return out


def stream_counts(dataset: PlannedStreams) -> StreamCounts:
    """A StreamCounts over `dataset`'s streams.

    Args:
        dataset: the dataset (its plan config and streams).
    """
    config, streams = dataset.config, dataset.streams
    names = [str(s.name or i) for i, s in enumerate(streams)]
    targets = np.asarray(config.samples_per_stream_epoch, float) / max(int(config.epoch_size), 1)
    return StreamCounts(config.stream_offsets, names, targets)


def cache_metrics(dataset: object) -> dict[str, float]:
    """The node cache's counters under `cache/...` (empty for a dataset that is not
    `CacheCounted`).

    Args:
        dataset: the dataset read.
    """
    if not isinstance(dataset, CacheCounted):
        return {}
    s = dataset.cache_stats()
    return {"cache/hits": float(s.hits), "cache/misses": float(s.misses),
            "cache/hit_rate": float(s.hit_rate), "cache/downloads": float(s.downloads),
            "cache/bytes_downloaded": float(s.bytes_downloaded),
            "cache/evictions": float(s.evictions),
            "cache/needed_evictions": float(s.needed_evictions),
            "cache/wait_s": float(s.wait_seconds)}


def disk_metrics(dataset: object) -> dict[str, float]:
    """`disk/bytes_read` and `disk/rows_read`: the raw bytes and rows this process's reads
    copied out of shards on local disk (empty for a dataset that is not `ReadCounted`).

    Args:
        dataset: the dataset read.
    """
    if not isinstance(dataset, ReadCounted):
        return {}
    t = dataset.read_tally()
    return {"disk/bytes_read": float(t.bytes_read), "disk/rows_read": float(t.rows)}


class WorkerReads:
    """The bytes and rows DataLoader workers copied out of shards on local disk, in memory the
    training process shares with them (one row per worker, written only by that worker). Set as
    the sink of the dataset's `ReadTally` before the workers start, it travels to them with the
    dataset; reads in the process that made it are not counted here (its own tally has them).

    Args:
        workers: the loader's `num_workers`.
    """

    def __init__(self, workers: int) -> None:
        self.workers = max(int(workers), 1)
        self.owner = os.getpid()
        self._shared: Any = multiprocessing.RawArray(ctypes.c_int64, 2 * self.workers)
        self._row: tuple[int, np.ndarray | None] = (self.owner, None)  # (pid, its row)

    def add(self, bytes_read: int, rows: int) -> None:
        """Count a read of `rows` rows, `bytes_read` bytes, in the worker calling it."""
        pid, row = self._row
        if pid != os.getpid():
            row = self._worker_row()
        if row is not None:
            row[0] += bytes_read
            row[1] += rows

    def _worker_row(self) -> np.ndarray | None:
        slot = worker_slot()
        row = None
        if self._shared is not None and slot is not None and slot.id < self.workers:
            row = np.frombuffer(self._shared, np.int64).reshape(self.workers, 2)[slot.id]
        self._row = (os.getpid(), row)
        return row

    def totals(self) -> ReadTotals:
        """What the workers read so far."""
        if self._shared is None:
            return ReadTotals()
        counts = np.frombuffer(self._shared, np.int64).reshape(self.workers, 2).sum(axis=0)
        return ReadTotals(int(counts[0]), int(counts[1]))

    def __getstate__(self) -> dict[str, Any]:
        state = {**self.__dict__, "_row": (self.owner, None)}
        if multiprocessing.context.get_spawning_popen() is None:
            state["_shared"] = None  # pickled for anything but starting a worker: counts nothing
        return state


def summary(metrics: dict[str, float]) -> str:
    """One line for a log."""
    return (f"{metrics.get('batches', 0):.0f} batches, {metrics.get('samples_per_s', 0):.1f} "
            f"samples/s ({metrics.get('recent_samples_per_s', 0):.1f} recent), data wait "
            f"{metrics.get('data_wait_fraction', 0):.1%} of wall time "
            f"({metrics.get('recent_data_wait_s', 0) * 1e3:.2f} ms/step recent), first batch "
            f"{metrics.get('first_batch_s', 0):.3f} s, cache {metrics.get('cache/hits', 0):.0f} "
            f"hits / {metrics.get('cache/misses', 0):.0f} misses")


def log_summary(metrics: dict[str, float]) -> None:
    """Log `summary(metrics)` at INFO through `streaming.metrics`, visibly: the user asked for
    it (STREAMING_METRICS_EVERY), so a logger nobody configured is set to INFO, and without a
    handler on its way to the root it gets one writing to stderr. A level the user set on
    `streaming.metrics` (e.g. WARNING, to silence it) and handlers they installed are kept.

    Args:
        metrics: the loader's `metrics()`.
    """
    if log.level == logging.NOTSET and not log.isEnabledFor(logging.INFO):
        log.setLevel(logging.INFO)
    if not _reaches_a_handler(log):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
    log.info("loader: %s", summary(metrics))


def _reaches_a_handler(logger: logging.Logger) -> bool:
    """Whether a record of `logger` meets a handler (not counting logging's last resort,
    which shows only warnings)."""
    node: logging.Logger | None = logger
    while node is not None:
        if node.handlers:
            return True
        node = node.parent if node.propagate else None
    return False


def gather_metrics(metrics: dict[str, float]) -> list[dict[str, float]] | None:
    """Every rank's `metrics` on rank 0 (a list by rank; None on the other ranks) when a
    torch.distributed process group exists; `[metrics]` without one. A collective: every
    rank must call it.

    Args:
        metrics: this rank's `loader.metrics()`.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [metrics]
    rank = dist.get_rank()
    out: list[Any] | None = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object(metrics, out, dst=0)
    return out


class IterationCount(Protocol):
    """The running iteration's progress: `count`, the samples it yielded so far."""

    count: int


class WatchedDataset(PlannedStreams, CacheCounted, ReadCounted, Protocol):
    """What IterationWatch reads of the dataset it watches (StreamingDataset).

    Args:
        session: its progress on the node (`count`: samples the running iteration yielded).
    """

    session: IterationCount


class IterationWatch:
    """The metrics of a dataset iterated directly in this process: each read (a chunk of
    samples) is a step, timed while the loop waits for it.

    Args:
        dataset: the StreamingDataset (its streams, config, session and cache).
    """

    def __init__(self, dataset: WatchedDataset) -> None:
        self.dataset = dataset
        self.meter = Meter()
        self.streams = stream_counts(dataset)
        self.base = 0  # samples of the iterations before this one
        self.seen = 0  # samples of this one the loop had taken when it last asked for more

    def begin(self, ids: np.ndarray) -> None:
        """An iteration over planned `ids` starts (the session's count is back at zero)."""
        self.meter.start()
        self.base += self.seen
        self.seen = 0
        self.streams.begin(ids, self.base)

    def consumed(self) -> int:
        """Samples the loop took from this process's iterations so far."""
        return self.base + int(self.dataset.session.run.count)

    def timed(self, chunks: Iterable[Sequence[Any]]) -> Iterator[Sequence[Any]]:
        """`chunks`, with the time until each arrives recorded as a step."""
        it = iter(chunks)
        session = self.dataset.session
        while True:
            self.seen = session.run.count
            asked = time.perf_counter_ns()
            try:
                chunk = next(it)
            except StopIteration:
                self.seen = session.run.count
                return
            now = time.perf_counter_ns()
            self.meter.step(now - asked, len(chunk), now)
            yield chunk

    def metrics(self) -> dict[str, float]:
        """The flat dict (see `StreamingDataLoader.metrics`)."""
        out = self.meter.as_dict()
        out.update(self.streams.as_dict(self.consumed()))
        out.update(cache_metrics(self.dataset))
        out.update(disk_metrics(self.dataset))
        return out
