"""Global sample id -> (shard, row in shard), vectorised over whole id arrays with searchsorted."""

from __future__ import annotations

import operator
from bisect import bisect_right

import numpy as np

from streaming.errors import ArgumentError


class SampleLocator:
    """Maps global sample ids to (shard id, row) over concatenated shards of given sizes.

    Empty shards are allowed: they own no id and are skipped by the lookup.

    Args:
        samples_per_shard: each shard's sample count, in global shard order.
    """

    def __init__(self, samples_per_shard: np.ndarray) -> None:
        sizes = np.asarray(samples_per_shard, dtype=np.int64)
        if sizes.ndim != 1 or (sizes < 0).any():
            raise ArgumentError("samples_per_shard must be a 1-d array of non-negative counts")
        self.samples_per_shard = sizes
        self.shard_starts = np.zeros(len(sizes), np.int64)
        if len(sizes):
            np.cumsum(sizes[:-1], out=self.shard_starts[1:])
        self.num_samples = int(sizes.sum())
        # Python ints for one id at a time (a C-level bisect, no numpy call per lookup), made
        # on the first such lookup and never pickled: most processes only locate arrays.
        self._starts: list[int] | None = None

    def __len__(self) -> int:
        return self.num_samples

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Shard ids and rows of an array of global ids (IndexError if any is out of range)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.num_samples):
            bad = ids[(ids < 0) | (ids >= self.num_samples)][0]
            raise IndexError(f"sample id {int(bad)} out of range [0, {self.num_samples})")
        shards = np.searchsorted(self.shard_starts, ids, side="right") - 1
        return shards, ids - self.shard_starts[shards]

    def __getitem__(self, sample_id: int) -> tuple[int, int]:
        """(shard, row) of one global sample id (an integer: TypeError for anything else);
        negative ids count from the end."""
        sid = operator.index(sample_id)
        if sid < 0:
            sid += self.num_samples
        if not 0 <= sid < self.num_samples:
            raise IndexError(f"sample id {sample_id} out of range [0, {self.num_samples})")
        starts = self._starts
        if starts is None:
            starts = self._starts = self.shard_starts.tolist()
        shard = bisect_right(starts, sid) - 1
        return shard, sid - starts[shard]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_starts": None}
