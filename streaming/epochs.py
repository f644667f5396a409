"""Which epoch an iteration runs and from where: a small per-rank array in shared memory.

DataLoader workers are separate processes (re-created every epoch unless persistent), so the
epoch cannot live in the dataset object. Each rank's main process owns one segment holding the
resume point written by `load_state_dict`, the number G of iterations the rank has started, and
for every (num_workers, worker) the last iteration that worker ran. A worker starting up either
joins iteration G (a sibling of the same DataLoader already started it) or starts iteration G+1
(it ran G itself, or G was run by a different set of workers, e.g. the main process). Iteration
k (from 0) runs epoch `resume_epoch + k`, from `resume_sample` when k == 0, else from 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from streaming.coord.files import shm_dir
from streaming.coord.lock import FileLock
from streaming.coord.shm import SharedArray
from streaming.errors import CoordinationError

_EPOCH, _SAMPLE, _NCN, _SEED, _ITER = 0, 1, 2, 3, 4
_SLOTS = 8
MAX_WORKERS = 64
_SIZE = _SLOTS + MAX_WORKERS * (MAX_WORKERS + 1) // 2


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
            a[_ITER] = 0
            a[_NCN], a[_SEED] = num_canonical_nodes, shuffle_seed
            a[_EPOCH], a[_SAMPLE] = epoch, sample_in_epoch

    def begin(self, worker: int, num_workers: int) -> tuple[int, int]:
        """Register worker `worker` of `num_workers` starting; return (epoch, sample_in_epoch)."""
        if not 0 < num_workers <= MAX_WORKERS:
            raise CoordinationError(f"at most {MAX_WORKERS} DataLoader workers, got {num_workers}")
        a = self._array
        with FileLock(self.lock_path, timeout=30.0):
            row = a[_row(num_workers)]
            current = int(a[_ITER])
            if row[worker] == current or not (row == current).any():
                current += 1
                a[_ITER] = current
            row[worker] = current
            k = current - 1
            return int(a[_EPOCH]) + k, int(a[_SAMPLE]) if k == 0 else 0

    def current(self) -> tuple[int, int]:
        """(epoch, sample offset it started from) of the latest iteration of this rank."""
        a = self._array
        k = int(a[_ITER])
        return int(a[_EPOCH]) + max(k - 1, 0), int(a[_SAMPLE]) if k <= 1 else 0

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
