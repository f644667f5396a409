"""Metrics that were never asked for keep no plan alive: a run iterated for many epochs without
calling `metrics()` holds the same memory after the tenth epoch as after the second, and the
counts it gives when finally asked are still exact."""

from __future__ import annotations

import gc
import os
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

import pytest

import streaming
from streaming import PackedStreamingDataset, StreamingDataLoader, StreamingDataset
from tests.support.datasets import write_ids, write_tokens

EPOCH = 20_000  # planned ids per epoch: 160 KB each as int64


OURS = [tracemalloc.Filter(True, f"{Path(streaming.__file__).parent}{os.sep}*")]


def _growth_over_epochs(run_epoch, epochs: int) -> int:
    """Bytes allocated by this library's code and still held after `epochs` more epochs than
    after the first two (what other threads of the test process allocate meanwhile, such as
    pytest-xdist's, is not counted)."""
    run_epoch()
    tracemalloc.start()
    try:
        for _ in range(2):
            run_epoch()
        gc.collect()
        before = tracemalloc.take_snapshot().filter_traces(OURS)
        for _ in range(epochs):
            run_epoch()
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(OURS)
        return sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    finally:
        tracemalloc.stop()


def _drain(items: Iterable) -> None:
    for _ in items:
        pass


@pytest.mark.parametrize("through", ["dataset", "loader"])
def test_epochs_never_asked_for_metrics_keep_no_plan(tmp_path: Path, through: str) -> None:
    ds = StreamingDataset(local=write_ids(tmp_path / "a", 2000, size_limit=1 << 16),
                          epoch_size=EPOCH, batch_size=100, shuffle=True)
    source = ds if through == "dataset" else StreamingDataLoader(ds, batch_size=100)
    grown = _growth_over_epochs(lambda: _drain(source), epochs=3)
    assert grown < EPOCH * 8 // 2, f"{grown} bytes kept after 3 more epochs"
    m = source.metrics()
    assert m["samples"] == 6 * EPOCH == m["stream/0/samples"]


def test_packed_epochs_never_asked_for_metrics_keep_no_pack_plan(tmp_path: Path) -> None:
    write_tokens(tmp_path / "a", 4000, max_len=40)
    ds = PackedStreamingDataset(local=str(tmp_path / "a"), shuffle=True,
                                packing_length=64, packs_per_batch=4)
    packs = 0

    def epoch() -> None:
        nonlocal packs
        for batch in ds:
            packs += len(batch["pack_lengths"])

    grown = _growth_over_epochs(epoch, epochs=3)
    assert grown < 4000 * 8 // 2, f"{grown} bytes kept after 3 more epochs"
    m = ds.metrics()
    assert m["packing/packs"] == packs and 0 < m["packing/fill_rate"] <= 1
