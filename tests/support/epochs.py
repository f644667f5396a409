"""One epoch of a dataset as the tests run it: in this process, through a DataLoader, under a
watched cache folder, until a bad shard stops it, in a fresh process (no shared cache table
inherited, as a second run finds the disk), or as one rank of a one-node job."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torch.utils.data import DataLoader

from streaming import StreamingDataLoader, StreamingDataset
from streaming.cache.table.cache_stats import CacheStats
from streaming.errors import CoordinationError
from streaming.format.index import read_index
from streaming.plan import World
from tests.support.folder_size import peak_size
from tests.support.fresh import fresh_context
from tests.support.loaders import drain


def sample_id(sample: dict) -> int:
    return int(sample["id"])


def whole_sample(sample: dict) -> tuple[int, str, bytes]:
    return int(sample["id"]), sample["text"], bytes(sample["blob"])


def read_ids(ds: StreamingDataset) -> list[int]:
    """The ids of one epoch iterated in this process (then closes `ds`)."""
    try:
        return [sample_id(sample) for sample in ds]
    finally:
        ds.close()


def loader_epoch(ds: StreamingDataset, workers: int,
                 row: Callable[[dict], object] = sample_id) -> list:
    """`row(sample)` for every sample of one epoch (then closes `ds`)."""
    loader = DataLoader(ds, batch_size=None, num_workers=workers)  # streams differ in schema
    try:
        return [row(sample) for sample in loader]
    finally:
        ds.close()


def raw_bytes(folder: Path) -> int:
    """The uncompressed size of every shard of the dataset in `folder`."""
    return int(np.sum(read_index(folder / "index.json").raw_bytes))


def watched_epoch(ds: StreamingDataset, cache: Path) -> tuple[list[int], int, CacheStats]:
    """The ids of one epoch through StreamingDataLoader (batch 16, 2 workers), the largest size
    the `cache` folder reached meanwhile, and the cache stats (then closes `ds`)."""
    try:
        with peak_size(cache) as peak:
            loader = StreamingDataLoader(ds, batch_size=16, num_workers=2)
            seen = [i for batch in loader for i in batch["id"].tolist()]
        stats = ds.cache_stats()
    finally:
        ds.close()
    return seen, peak[0], stats


def assert_epoch_fails(ds: StreamingDataset, epoch: Iterable, wanted: type[Exception],
                victim: str) -> None:
    """Iterating `epoch` (over `ds`, closed after) fails with `wanted` naming `victim`. The
    worker that met the bad shard raises `wanted`; a worker waiting on the node at that moment
    may stop with CoordinationError quoting it, and a loader re-raises whichever worker's batch
    comes first. The error comes without its traceback, so the loader's workers stop at once
    (tests/support/loaders.py)."""
    try:
        with pytest.raises((wanted, CoordinationError), match=re.escape(victim)) as info:
            drain(epoch)
    finally:
        ds.close()
    assert isinstance(info.value, wanted) or wanted.__name__ in str(info.value)


def _epoch(kwargs: dict[str, Any]) -> tuple[list[int], dict]:
    ds = StreamingDataset(**kwargs)
    try:
        return [int(sample["id"]) for sample in ds], ds.cache_stats().as_dict()
    finally:
        ds.close()


def epoch_in_new_process(**kwargs: Any) -> tuple[list[int], dict]:
    """The ids of one epoch of StreamingDataset(**kwargs) and its cache stats, from a fresh
    process."""
    with ProcessPoolExecutor(1, mp_context=fresh_context()) as pool:
        return pool.submit(_epoch, kwargs).result(timeout=120)


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
