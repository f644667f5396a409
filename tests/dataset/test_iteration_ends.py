"""Every way of iterating a dataset ends its iteration when it runs out (the state then points
at the next epoch) and leaves it open when the consumer stops early (the state is where it
stopped): samples, column batches (`iter_batches`) and packs."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import PackedStreamingDataset, StreamingDataset
from tests.support.datasets import write_ids, write_tokens

N = 120


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_ids(tmp_path_factory.mktemp("ends") / "src", N)


def _position(ds: StreamingDataset) -> tuple[int, int]:
    state = ds.state_dict()
    assert state == ds.iteration_state()  # the named method of the no-argument form
    assert ds.state_dict(7, True) == ds.state_after(7, from_beginning=True)
    return state["epoch"], state["sample_in_epoch"]


def _samples(ds: StreamingDataset):
    return iter(ds)


def _batches(ds: StreamingDataset):
    return ds.iter_batches(10)


@pytest.mark.parametrize("iterate", [_samples, _batches], ids=["samples", "batches"])
def test_an_iteration_run_to_its_end_ends_and_one_closed_early_does_not(data, iterate):
    ds = StreamingDataset(local=str(data), batch_size=10)
    try:
        units = iterate(ds)
        assert sum(1 for _ in units) > 0
        assert _position(ds) == (1, 0)
        assert ds.state_dict(0)["epoch"] == 1  # the loader's form sees the ended epoch too
        units = iterate(ds)
        next(units), next(units)
        units.close()
        taken = 2 if iterate is _samples else 20
        assert _position(ds) == (1, taken)
        assert list(iterate(ds))  # the next iteration runs the epoch after the closed one
        assert _position(ds) == (3, 0)
    finally:
        ds.close()


def test_a_packed_iteration_run_to_its_end_ends_and_one_closed_early_does_not(tmp_path):
    write_tokens(tmp_path / "a", N, max_len=300)
    ds = PackedStreamingDataset(local=str(tmp_path / "a"), packing_length=512,
                                packs_per_batch=2, shuffle=True)
    try:
        assert sum(1 for _ in ds) == len(ds)
        state = ds.state_dict()
        assert (state["source"]["epoch"], state["packs_in_epoch"]) == (1, 0)
        batches = iter(ds)
        next(batches)
        batches.close()
        state = ds.state_dict()
        assert (state["source"]["epoch"], state["packs_in_epoch"]) == (1, 2)
        assert state == ds.iteration_state()
        assert ds.state_dict(4, True) == ds.state_after(4, from_beginning=True)
        assert ds.state_after(4)["packs_in_epoch"] == 4
    finally:
        ds.close()
