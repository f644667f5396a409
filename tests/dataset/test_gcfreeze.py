"""Forked DataLoader workers freeze the objects they inherit; the training process never."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch

from streaming import StreamingDataset
from streaming.util import gcfreeze
from streaming.util.gcfreeze import freeze_inherited


def _freeze_count(samples: list) -> tuple[int, list[int]]:
    """Runs in the worker: how many objects its collector has frozen, and the ids."""
    return gc.get_freeze_count(), [int(s["id"]) for s in samples]


def test_not_in_the_training_process() -> None:
    before = gc.get_freeze_count()
    assert freeze_inherited() is False
    assert gc.get_freeze_count() == before


def test_once_per_worker_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.utils.data.get_worker_info", lambda: object())
    monkeypatch.setattr(gcfreeze, "_frozen_pid", None)
    try:
        assert freeze_inherited() is True
        assert gc.get_freeze_count() > 0
        assert freeze_inherited() is False  # the same process again
    finally:
        gc.unfreeze()


def test_a_forked_worker_reads_with_its_inherited_objects_frozen(ids_dataset: Path) -> None:
    parent = gc.get_freeze_count()
    ds = StreamingDataset(local=str(ids_dataset), batch_size=10)
    loader = torch.utils.data.DataLoader(ds, batch_size=10, num_workers=1,
                                         multiprocessing_context="fork",
                                         collate_fn=_freeze_count)
    counts, ids = [], []
    for count, batch in loader:
        counts.append(count)
        ids.extend(batch)
    assert sorted(ids) == list(range(300))
    # Everything the worker inherited (at least the torch modules we imported) is frozen.
    assert min(counts) > 10_000
    assert gc.get_freeze_count() == parent  # the parent's collector is untouched
