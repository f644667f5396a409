"""Small MDS datasets written with MDSWriter for the dataset tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from writers.mds import MDSWriter


def write_ids(out: Path, n: int, *, start: int = 0, size_limit: int = 1 << 10,
              compression: str | None = None, hashes: list[str] | None = None) -> Path:
    """A dataset whose sample i has `id` = start + i and a small variable payload."""
    with MDSWriter(columns={"id": "int", "payload": "ndarray:int32"}, out=out,
                   size_limit=size_limit, compression=compression, hashes=hashes) as w:
        for i in range(n):
            w.write({"id": start + i, "payload": np.full(3, start + i, dtype=np.int32)})
    return out


MANY_SHARDS_SAMPLES = 6000


@pytest.fixture(scope="session")
def many_shards(tmp_path_factory) -> Path:
    """A zstd dataset of MANY_SHARDS_SAMPLES (~40 per shard, ~150 shards) that a cache_limit
    holds only part of; tests use its folder as a remote."""
    from tests.cache._data import write_dataset

    folder = tmp_path_factory.mktemp("many_shards")
    write_dataset(folder, MANY_SHARDS_SAMPLES, size_limit=12_000)
    return folder


@pytest.fixture
def ids_dataset(tmp_path: Path) -> Path:
    return write_ids(tmp_path / "src", 300)


def take(loader, batches: int) -> tuple[list[int], dict]:
    """The `id`s of a loader's first `batches` batches and its state right after them."""
    seen: list[int] = []
    for k, batch in enumerate(loader):
        seen += batch["id"].tolist()
        if k + 1 == batches:
            break
    return seen, loader.state_dict()
