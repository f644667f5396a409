"""A cache_limit the node's plan cannot run in once the loader's DataLoader workers read it is
refused when the StreamingDataLoader is built, with CacheLimitError naming the minimum: the
dataset checked its limit at construction for one reader per rank, not knowing the workers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.errors import CacheLimitError
from tests.cache.helpers import write_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("workers") / "src"
    write_dataset(folder, 1200, size_limit=8_000)
    return folder


def _dataset(source: Path, local: Path, limit: int) -> StreamingDataset:
    return StreamingDataset(remote=str(source), local=str(local), cache_limit=limit,
                            batch_size=8, shuffle=False)


def _minimum(refused: pytest.ExceptionInfo) -> int:
    return int(re.search(r"Minimum cache usage \((\d+) bytes\)", str(refused.value)).group(1))


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
def test_a_limit_too_small_for_the_loaders_workers_is_refused_naming_the_minimum(source,
                                                                                 tmp_path):
    with pytest.raises(CacheLimitError) as refused:
        _dataset(source, tmp_path / "c", 1)
    one_reader = _minimum(refused)
    ds = _dataset(source, tmp_path / "c", one_reader)  # enough for one reader per rank
    try:
        StreamingDataLoader(ds, batch_size=8, num_workers=1)
        StreamingDataLoader(ds, batch_size=8, num_workers=0)
        with pytest.raises(CacheLimitError, match="Minimum cache usage") as refused:
            StreamingDataLoader(ds, batch_size=8, num_workers=3)
        three_readers = _minimum(refused)
        assert three_readers > one_reader
    finally:
        ds.close()
    ds = _dataset(source, tmp_path / "c", three_readers)
    try:
        loader = StreamingDataLoader(ds, batch_size=8, num_workers=3)
        assert sum(len(batch["id"]) for batch in loader) == 1200
    finally:
        ds.close()
