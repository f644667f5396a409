"""A stall report: where the DataLoader workers are when the training loop has waited too long.

torch's DataLoader waits for a worker's next batch without a limit by default (`timeout=0`).
A worker stuck anywhere (a store that never answers, a lock held by a process that is gone, a
user transform that loops) then stops the rank, and with it the whole job, without a word.
While a StreamingDataLoader iteration with workers runs, a daemon thread looks at the loop now
and then; once the loop has waited in `next()` for `after` seconds without a new batch, it logs
a warning with every live worker's threads (`streaming.coord.worker_stacks`), and again after
twice, four times... as long, until a batch arrives. Nothing is interrupted: a slow but healthy
read goes on. The loop's side is three attribute writes per batch (`Waiting`).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from streaming.coord.worker_stacks import forget_gone_workers, worker_stacks

log = logging.getLogger("streaming.loader")

STALL_ENV = "STREAMING_STALL_REPORT_S"
DEFAULT_AFTER_S = 300.0  # seconds of waiting for one batch before the first report
LOOKS_PER_PERIOD = 4  # looks at the loop per `after` seconds


def after_from_env() -> float:
    """Seconds before a stall report, from STREAMING_STALL_REPORT_S (0: never; default 300)."""
    raw = os.environ.get(STALL_ENV, "").strip()
    if not raw:
        return DEFAULT_AFTER_S
    try:
        value = float(raw)
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %s", STALL_ENV, raw,
                    DEFAULT_AFTER_S)
        return DEFAULT_AFTER_S
    return max(value, 0.0)


class Waiting:
    """What the loop tells the watch: whether it is inside `next()` waiting for the workers,
    and how many batches it has received (a plain slotted object: written on every batch)."""

    __slots__ = ("batches", "waiting")

    def __init__(self) -> None:
        self.waiting = False
        self.batches = 0


class StallWatch:
    """The watching thread of one iteration; `stop()` ends it.

    Args:
        loop: what the loop reports.
        after: seconds of waiting for one batch before the first report (> 0).
        workers: the loader's worker count, for the message.
    """

    def __init__(self, loop: Waiting, after: float, workers: int) -> None:
        self.loop, self.after, self.workers = loop, float(after), workers
        self.reports = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="streaming-stall-watch")
        self._thread.start()

    def stop(self) -> None:
        """End the watch (and forget the stacks files of workers that have ended)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        forget_gone_workers()

    def _run(self) -> None:
        look = self.after / LOOKS_PER_PERIOD
        seen, since, due = -1, 0.0, self.after
        while not self._stop.wait(look):
            loop, now = self.loop, time.monotonic()
            if not loop.waiting or loop.batches != seen:
                seen, since, due = loop.batches, now, self.after
                if not loop.waiting:
                    seen = -1
                continue
            if now - since >= due:
                self._report(now - since, seen)
                due *= 2

    def _report(self, waited: float, batches: int) -> None:
        self.reports += 1
        stacks = worker_stacks()
        shown = "\n".join(f"--- worker pid {s.pid} ---\n{s.text}" for s in stacks) or (
            "(no worker's stacks could be read: none has begun reading yet, or this platform "
            "has no signal for it)")
        log.warning(
            "StreamingDataLoader: the training loop has waited %.0f s for batch %d from its %d "
            "worker(s) and is still waiting (stall report %d; %s=0 turns these off). Every "
            "worker thread's stack, most recent call first:\n%s", waited, batches + 1,
            self.workers, self.reports, STALL_ENV, shown)
