"""Node plans published in shared memory, so the processes of a node compute each plan once."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.coord.shm_files import shm_dir

PLAN_LOCK_TIMEOUT = 300.0  # seconds a peer may spend computing the node plan


class PlanBoard:
    """Node plans published in shared memory: the first local process to ask for a plan
    computes and publishes it; the others attach and copy their row.

    The publisher keeps its latest segments alive; if it is gone before a late peer arrives,
    that peer recomputes (the plan is a pure function, so the result is the same).
    """

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self._owned: list[SharedArray] = []

    def __getstate__(self) -> dict:
        return {"namespace": self.namespace, "_owned": []}

    def slice(self, key: str, compute: Callable[[], np.ndarray], rank: int, worker: int,
              *, keep: int = 2) -> np.ndarray:
        """Worker (rank, worker)'s row of the node plan `key` (an int64 [ranks, workers, n]
        array `compute` returns), computed once per node; this process keeps the `keep` plans
        it published last alive."""
        digest = hashlib.blake2b(key.encode(), digest_size=6).hexdigest()
        name = self.namespace.name("p" + digest)
        lock = FileLock(shm_dir() / self.namespace.name("l" + digest), timeout=PLAN_LOCK_TIMEOUT)
        with lock:
            try:
                seg = SharedArray.attach(name)
            except SegmentMissingError:
                ids = compute()
                seg = SharedArray.create(name, ids.shape, np.int64, fill=None)
                seg.array[...] = ids
                self._owned.append(seg)
                while len(self._owned) > keep:
                    self._owned.pop(0).close()
                return np.array(ids[rank, worker])
        try:
            return np.array(seg.array[rank, worker])
        finally:
            seg.close()

    def close(self) -> None:
        """Remove the plans this process published."""
        while self._owned:
            self._owned.pop().close()
