"""Packing composed over any source offering the dataset's public surface (its world, its
session, its rank's planned ids per epoch and reading rows): here a tiny in-memory one, with
no shard files, whose sample i holds lengths[i] tokens all equal to i."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streaming.dataset.session import Session
from streaming.errors import ArgumentError
from streaming.packing.streaming import PackedStreamingDataset
from streaming.plan import PlanConfig, World

N = 120


class FakeSource:
    def __init__(self, folder: Path, lengths: np.ndarray, world: World) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = PlanConfig(samples_per_shard=np.full(N // 10, 10, np.int64),
                            shards_per_stream=np.array([N // 10], np.int64), shuffle=True)
        self.world, self.lengths = world, lengths
        self.session = Session(config, world, [folder], detected=False)
        self.read: list[int] = []

    def rank_sample_ids(self, epoch: int) -> np.ndarray:
        return self.session.plans.worker_sample_ids(epoch, 0, self.session.plans.rank_world())

    def read_samples(self, ids: np.ndarray, epoch: int = 0) -> Iterator[dict[str, Any]]:
        for i in ids[ids >= 0].tolist():
            self.read.append(i)
            yield {"tokens": np.full(int(self.lengths[i]), i, np.int64)}

    def close(self) -> None:
        self.session.close()


def _lengths() -> np.ndarray:
    return np.random.default_rng(0).integers(1, 40, N)


def _packed(folder: Path, world: World | None = None) -> PackedStreamingDataset:
    lengths = _lengths()
    source = FakeSource(folder, lengths, world or World())
    return PackedStreamingDataset(source=source, lengths=lengths,
                                  packing_length=64, packs_per_batch=2)


def _ids(batches) -> list[int]:
    return [i for b in batches for i in b["sample_ids"].tolist()]


def _resumed_ids(folder: Path, state: dict) -> list[int]:
    """The sample ids a fresh packed dataset yields after loading `state`."""
    ds = _packed(folder)
    try:
        ds.load_state_dict(state)
        return _ids(ds)
    finally:
        ds.close()


def test_packs_hold_each_sample_once_with_its_own_tokens(tmp_path):
    ds = _packed(tmp_path / "a")
    try:
        batches = list(ds)
        assert sorted(_ids(batches)) == list(range(N)) and len(batches) == len(ds)
        assert ds.source.read == _ids(batches)  # rows are read in pack order, once each
        for batch in batches:
            assert (batch["pack_lengths"] <= 64).all()
            real = batch["input_ids"][batch["labels"] != -100]
            assert set(real.tolist()) <= set(batch["sample_ids"].tolist())
    finally:
        ds.close()


def test_the_state_nests_the_source_state_and_resumes_exactly(tmp_path):
    ds = _packed(tmp_path / "a")
    try:
        full = ds.rank_packs(0).ids.tolist()
        it = iter(ds)
        head = [next(it) for _ in range(3)]
        state = ds.state_dict()
    finally:
        ds.close()
    assert set(state) == {"source", "packs_in_epoch", "packing"}
    assert (state["source"]["epoch"], state["packs_in_epoch"]) == (0, 6)
    assert _ids(head) + _resumed_ids(tmp_path / "b", state) == full
    flat = {**state.pop("source"), **state}  # the flat layout of older states loads as well
    assert _ids(head) + _resumed_ids(tmp_path / "c", flat) == full


def test_ranks_get_equal_pack_counts_and_split_the_samples(tmp_path):
    ranks = [_packed(tmp_path / "node", World(1, 2, 1, 0, r)) for r in range(2)]
    try:
        counts = {ds.pack_count(0) for ds in ranks}
        seen = [i for ds in ranks for i in _ids(ds)]
        assert len(counts) == 1
        assert sorted(seen) == list(range(N))
    finally:
        for ds in ranks:
            ds.close()


def test_the_dataset_never_loads_packing_and_packing_loads_the_dataset_when_it_builds_one():
    import subprocess
    import sys

    dataset = ("streaming.dataset.streaming_dataset, streaming.dataset.local_dataset, "
               "streaming.dataset.lengths, streaming.dataset.token_mix")
    code = (f"import sys, {dataset}; "
            "sys.exit(any(m.startswith('streaming.packing') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    code = ("import sys, streaming.packing.streaming; "
            "sys.exit('streaming.dataset.streaming_dataset' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_dataset_arguments_beside_a_source_are_refused(tmp_path):
    lengths = _lengths()
    source = FakeSource(tmp_path / "a", lengths, World())
    try:
        with pytest.raises(ArgumentError, match=r"\['shuffle'\] go to it"):
            PackedStreamingDataset(source=source, lengths=lengths, packing_length=64,
                                   shuffle=True)
    finally:
        source.close()


def test_a_failed_read_fails_the_node_and_leaves_the_iteration_open(tmp_path):
    ds = _packed(tmp_path / "a")
    source = ds.source

    def broken(ids: np.ndarray, epoch: int = 0) -> Iterator[dict[str, Any]]:
        raise OSError("disk gone")
        yield  # a generator, as a source's reader is

    source.read_samples = broken
    try:
        with pytest.raises(OSError, match="disk gone"):
            next(iter(ds))
        state = ds.iteration_state()
        assert (state["source"]["epoch"], state["packs_in_epoch"]) == (0, 0)  # not ended
        with pytest.raises(OSError, match="disk gone"):  # the node's peers see the cause
            source.session.node.check()
    finally:
        ds.close()
