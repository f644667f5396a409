"""Helpers for the dataset-over-S3 tests that spawned training processes import."""

from __future__ import annotations

import os

from streaming import StreamingDataset
from streaming.plan import World


def train_rank(env: dict, remote: str, local: str, rank: int, ranks: int) -> tuple[list, dict]:
    """One training process (rank `rank` of a one-node job): one epoch, its ids and the node's
    cache stats."""
    os.environ.update(env)
    ds = StreamingDataset(remote=remote, local=local, batch_size=8, shuffle=True,
                          world=World(1, ranks, 1, 0, rank, 0, 1))
    try:
        ids = [int(sample["id"]) for sample in ds]
        return ids, ds.cache_stats().as_dict()
    finally:
        ds.close()
