"""Which epoch an iteration runs and from where: a small per-rank array in shared memory.

DataLoader workers are separate processes (re-created every epoch unless persistent), so the
epoch cannot live in the dataset object. Each rank's main process owns one segment: a resume
point written by `load_state_dict`, and per worker the number of iterations it has started.
Worker w's k-th iteration (k from 0) runs epoch `resume_epoch + k`, from `resume_sample` when
k == 0 and from 0 otherwise, so all workers of all ranks agree without talking to each other.
"""

from __future__ import annotations

import numpy as np

from streaming.coord.shm import SharedArray
from streaming.errors import CoordinationError

_EPOCH, _SAMPLE, _NCN, _SEED = 0, 1, 2, 3
_SLOTS = 8
MAX_WORKERS = 1024


class EpochCounter:
    """Shared resume point + per-worker iteration counts of one rank (picklable by name)."""

    def __init__(self, name: str, *, create: bool) -> None:
        self.name = name
        self._seg: SharedArray | None = None
        if create:
            self._seg = SharedArray.create(name, (_SLOTS + MAX_WORKERS,), np.int64)

    def __getstate__(self) -> dict:
        return {"name": self.name, "_seg": None}

    @property
    def _array(self) -> np.ndarray:
        if self._seg is None:
            self._seg = SharedArray.attach(self.name, (_SLOTS + MAX_WORKERS,), np.int64,
                                           writable=True)
        return self._seg.array

    def set_resume(self, epoch: int, sample_in_epoch: int, num_canonical_nodes: int,
                   shuffle_seed: int) -> None:
        """Make the next iteration of every worker run `epoch` from `sample_in_epoch`."""
        a = self._array
        a[_SLOTS:] = 0
        a[_NCN], a[_SEED] = num_canonical_nodes, shuffle_seed
        a[_EPOCH], a[_SAMPLE] = epoch, sample_in_epoch

    def begin(self, worker: int) -> tuple[int, int]:
        """Count one more iteration of `worker`; return its (epoch, sample_in_epoch)."""
        if not 0 <= worker < MAX_WORKERS:
            raise CoordinationError(f"DataLoader worker {worker} >= {MAX_WORKERS} workers")
        a = self._array
        k = int(a[_SLOTS + worker])
        a[_SLOTS + worker] = k + 1
        return int(a[_EPOCH]) + k, int(a[_SAMPLE]) if k == 0 else 0

    def current(self) -> tuple[int, int]:
        """(epoch, sample offset it started from) of the latest iteration of worker 0."""
        a = self._array
        k = int(a[_SLOTS])
        return int(a[_EPOCH]) + max(k - 1, 0), int(a[_SAMPLE]) if k <= 1 else 0

    def overrides(self) -> tuple[int, int]:
        """(num_canonical_nodes, shuffle_seed) set by the last resume; 0/-1 when none."""
        a = self._array
        return int(a[_NCN]), int(a[_SEED])

    def close(self) -> None:
        if self._seg is not None:
            self._seg.close()
            self._seg = None
