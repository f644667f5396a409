"""Which epoch an iteration runs and from where: a small per-rank array in shared memory.

DataLoader workers are separate processes (re-created every epoch unless persistent), so the
epoch cannot live in the dataset object. Each rank's main process owns one segment holding the
resume point written by `load_state_dict`, the number G of iterations the rank has started, and
for every (num_workers, worker) the last iteration that worker ran. A worker starting up either
joins iteration G (a sibling of the same DataLoader already started it) or starts iteration G+1
(it ran G itself, or G was run by a different set of workers, e.g. the main process). Iteration
k (from 0) runs epoch `resume_epoch + k`, from `resume_sample` when k == 0, else from 0.

The training process can also read the first batches of an iteration itself and hand it over
(`hand_over`): the DataLoader workers it starts next, which carry the hand-over's token, then
join that iteration instead of starting the next one (each once), and go on after those batches.

A resume point can also be per worker (torchdata's StatefulDataLoader restores each worker from
its own state): then every worker of iteration 0 also skips the samples it had yielded, and when
every worker had ended its iteration, iteration 0 is the next epoch instead.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streaming.coord.lock import FileLock
from streaming.coord.shm import SharedArray
from streaming.coord.shm_files import shm_dir
from streaming.errors import CoordinationError, StateMismatchError

_EPOCH, _SAMPLE, _NCN, _SEED, _ITER, _WORKERS = 0, 1, 2, 3, 4, 5
_DONE, _DONE_OF = 6, 7  # workers that finished iteration G, of how many began it
# iteration G handed over to this many workers, after this many batches, with this token
_HANDED_TO, _HANDED, _TOKEN = 8, 9, 10
_SLOTS = 11
MAX_WORKERS = 64
_ROWS = MAX_WORKERS * (MAX_WORKERS + 1) // 2
_SKIP = _SLOTS + _ROWS  # per worker: samples of its list already yielded (per-worker resume)
_ENDED = _SKIP + MAX_WORKERS  # per worker: 1 when it had ended its iteration
_SIZE = _ENDED + MAX_WORKERS


@dataclass(frozen=True)
class IterationStart:
    """Where one worker's iteration starts: the epoch, the rank-wide resume point the plan is
    computed from, the samples of this worker's list to skip and whether it had ended (both
    nonzero only after a per-worker resume), and the batches of the rank's list the training
    process read before handing the iteration over to the workers (see `hand_over`)."""

    epoch: int
    sample_in_epoch: int
    skip: int = 0
    ended: bool = False
    handed: int = 0


def _row(num_workers: int) -> slice:
    """Slots of the workers of a DataLoader with `num_workers` workers (1 = main process)."""
    start = _SLOTS + (num_workers - 1) * num_workers // 2
    return slice(start, start + num_workers)


class EpochCounter:
    """Shared resume point + iteration bookkeeping of one rank (picklable by name)."""

    def __init__(self, name: str, lock_name: str, *, create: bool) -> None:
        self.name = name
        self.lock_path: Path = shm_dir() / lock_name
        self._seg: SharedArray | None = None
        if create:
            self._seg = SharedArray.create(name, (_SIZE,), np.int64)

    def __getstate__(self) -> dict:
        return {"name": self.name, "lock_path": self.lock_path, "_seg": None}

    @property
    def _array(self) -> np.ndarray:
        if self._seg is None:
            self._seg = SharedArray.attach(self.name, (_SIZE,), np.int64, writable=True)
        return self._seg.array

    def set_resume(self, epoch: int, sample_in_epoch: int, num_canonical_nodes: int,
                   shuffle_seed: int) -> None:
        """Make the next iteration run `epoch` from `sample_in_epoch`."""
        a = self._array
        with FileLock(self.lock_path, timeout=30.0):
            a[_SLOTS:] = 0
            a[_ITER] = a[_WORKERS] = a[_DONE] = a[_HANDED_TO] = a[_HANDED] = a[_TOKEN] = 0
            a[_NCN], a[_SEED] = num_canonical_nodes, shuffle_seed
            a[_EPOCH], a[_SAMPLE] = epoch, sample_in_epoch

    def set_worker_resume(self, epoch: int, sample_in_epoch: int, num_canonical_nodes: int,
                          shuffle_seed: int, *, worker: int, num_workers: int, skip: int,
                          ended: bool) -> None:
        """One worker's part of a per-worker resume point: every worker of the DataLoader
        loads its own (before any of them iterates), with the same epoch and sample."""
        _check_workers(num_workers)
        a = self._array
        with FileLock(self.lock_path, timeout=30.0):
            a[_SLOTS:_SKIP] = 0
            a[_ITER] = a[_DONE] = a[_HANDED_TO] = a[_HANDED] = a[_TOKEN] = 0
            a[_NCN], a[_SEED] = num_canonical_nodes, shuffle_seed
            a[_EPOCH], a[_SAMPLE] = epoch, sample_in_epoch
            a[_WORKERS] = num_workers
            a[_SKIP + worker], a[_ENDED + worker] = skip, int(ended)

    def begin_worker(self, worker: int, num_workers: int, token: int = 0) -> IterationStart:
        """Register worker `worker` of `num_workers` starting; return where it starts. A
        worker given the `token` of a `hand_over` joins the iteration handed over."""
        _check_workers(num_workers)
        a = self._array
        with FileLock(self.lock_path, timeout=30.0):
            row = a[_row(num_workers)]
            current = self._iteration_of(row, worker, num_workers, token)
            if current != a[_ITER]:
                a[_DONE], a[_DONE_OF] = 0, num_workers
                a[_HANDED_TO] = a[_HANDED] = a[_TOKEN] = 0
            a[_ITER] = current
            row[worker] = current
            if current == 1 and self._all_ended(num_workers):
                a[_EPOCH] += 1  # every worker had ended: iteration 0 is the next epoch
                a[_SAMPLE] = a[_WORKERS] = 0
            return self._start(current, worker, num_workers, token)

    def _iteration_of(self, row: np.ndarray, worker: int, num_workers: int, token: int) -> int:
        """The iteration number `worker` starts (caller holds the lock): the current one when
        it was handed over to this worker, or a sibling began it and this worker did not;
        else the next."""
        current = int(self._array[_ITER])
        if self._handed_to(num_workers, token):
            return current
        if row[worker] == current or not (row == current).any():
            current += 1
        return current

    def _handed_to(self, num_workers: int, token: int) -> bool:
        """Whether the current iteration was handed over to the caller (under the lock)."""
        a = self._array
        return bool(token) and a[_TOKEN] == token and a[_HANDED_TO] == num_workers

    def hand_over(self, num_workers: int, batches: int) -> int:
        """The training process began the latest iteration and read its first `batches`
        batches of the rank's list: `num_workers` DataLoader workers that begin with the token
        returned join that iteration and deal the rest of the list among them
        (`IterationStart.handed`).

        Args:
            num_workers: the DataLoader workers that go on with the iteration.
            batches: the batches of the rank's list already read.
        """
        _check_workers(num_workers)
        a = self._array
        token = secrets.randbits(62) + 1
        with FileLock(self.lock_path, timeout=30.0):
            if a[_ITER] == 0:
                raise CoordinationError("hand_over needs an iteration this process began")
            a[_HANDED_TO], a[_HANDED], a[_TOKEN] = num_workers, batches, token
            a[_DONE], a[_DONE_OF] = 0, num_workers
        return token

    def peek(self, worker: int, num_workers: int, token: int = 0) -> IterationStart:
        """Where worker `worker` of `num_workers` would start if it began now (no change)."""
        _check_workers(num_workers)
        a = self._array
        with FileLock(self.lock_path, timeout=30.0):
            current = self._iteration_of(a[_row(num_workers)], worker, num_workers, token)
            if current == 1 and self._all_ended(num_workers):
                return IterationStart(int(a[_EPOCH]) + 1, 0)
            return self._start(current, worker, num_workers, token)

    def _all_ended(self, num_workers: int) -> bool:
        a = self._array
        return int(a[_WORKERS]) == num_workers and bool(a[_ENDED:_ENDED + num_workers].all())

    def _start(self, current: int, worker: int, num_workers: int, token: int) -> IterationStart:
        """Where a worker starts iteration `current` (counted from 1; called under the
        lock)."""
        a = self._array
        k = current - 1
        epoch = int(a[_EPOCH]) + k
        handed = a[_ITER] == current and self._handed_to(num_workers, token)
        if k > 0 or handed:
            start = int(a[_SAMPLE]) if k == 0 else 0
            return IterationStart(epoch, start, handed=int(a[_HANDED]) if handed else 0)
        by_worker = int(a[_WORKERS])
        if by_worker == 0:
            return IterationStart(epoch, int(a[_SAMPLE]))
        if by_worker != num_workers:
            raise StateMismatchError(
                f"the loaded state was taken by DataLoader workers one by one ({by_worker} "
                f"workers); it is iterated by {num_workers}: resume with num_workers="
                f"{by_worker}")
        return IterationStart(epoch, int(a[_SAMPLE]), int(a[_SKIP + worker]),
                              bool(a[_ENDED + worker]))

    def current(self) -> tuple[int, int]:
        """(epoch, sample offset it started from) of the latest iteration of this rank."""
        a = self._array
        k = int(a[_ITER])
        return int(a[_EPOCH]) + max(k - 1, 0), int(a[_SAMPLE]) if k <= 1 else 0

    def finish(self, epoch: int) -> None:
        """A worker ran its iteration of `epoch` to the end."""
        a = self._array
        with FileLock(self.lock_path, timeout=30.0):
            if a[_ITER] > 0 and epoch == a[_EPOCH] + a[_ITER] - 1:
                a[_DONE] += 1

    def running_or_next(self) -> int:
        """The epoch this rank iterates now, or, when every worker of the latest iteration ran
        it to the end, the epoch its next iteration will run."""
        a = self._array
        k = int(a[_ITER])
        if k == 0 or a[_DONE] >= a[_DONE_OF]:
            return int(a[_EPOCH]) + k
        return int(a[_EPOCH]) + k - 1

    def next_epoch(self) -> int:
        """The epoch the next iteration of this rank will run."""
        a = self._array
        return int(a[_EPOCH]) + int(a[_ITER])

    def overrides(self) -> tuple[int, int]:
        """(num_canonical_nodes, shuffle_seed) set by the last resume; (0, 0) when none."""
        a = self._array
        return int(a[_NCN]), int(a[_SEED])

    def close(self) -> None:
        if self._seg is not None:
            self._seg.close()
            self._seg = None


def _check_workers(num_workers: int) -> None:
    if not 0 < num_workers <= MAX_WORKERS:
        raise CoordinationError(f"at most {MAX_WORKERS} DataLoader workers, got {num_workers}")
