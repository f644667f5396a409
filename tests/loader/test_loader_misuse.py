"""StreamingDataLoader misuse gets a clear, early error or warning; json columns whose dicts have
different keys batch as lists, as docs/dataset.md says."""

from __future__ import annotations

import warnings

import pytest
import torch

from streaming import StreamingDataLoader, StreamingDataset
from streaming.errors import PlanError
from streaming.loader.default_collate import collate
from writers.mds import MDSWriter

METAS = [{"a": 1}, {"b": [1, 2]}, {"a": 2, "c": "x"}, {}, {"d": None}, {"a": 3}]


@pytest.fixture
def json_dataset(tmp_path):
    out = tmp_path / "json"
    with MDSWriter(columns={"id": "int", "meta": "json"}, out=out, size_limit=200) as writer:
        for i in range(36):
            writer.write({"id": i, "meta": METAS[i % len(METAS)]})
    return out


@pytest.mark.parametrize("batch_size", [-1, 0, -8])
def test_non_positive_batch_size_is_refused(json_dataset, batch_size):
    dataset = StreamingDataset(local=str(json_dataset))
    with pytest.raises(PlanError, match="batch_size"):
        StreamingDataLoader(dataset, batch_size=batch_size)


@pytest.mark.parametrize("batch_size", ["4", 2.0])
def test_batch_size_that_is_not_an_int_is_refused(json_dataset, batch_size):
    dataset = StreamingDataset(local=str(json_dataset))
    with pytest.raises(PlanError, match=f"batch_size must be a positive int or None, got "
                                        f"{batch_size!r}"):
        StreamingDataLoader(dataset, batch_size=batch_size)


def test_batch_size_unlike_the_datasets_warns(json_dataset):
    dataset = StreamingDataset(local=str(json_dataset), batch_size=4)
    with pytest.warns(UserWarning, match=r"batch_size=6.*batch_size=4|batch_size=4.*batch_size=6"):
        StreamingDataLoader(dataset, batch_size=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StreamingDataLoader(dataset, batch_size=4)


def test_a_dataset_without_batch_size_read_by_several_workers_warns(json_dataset):
    """Its mid-epoch resume would raise: said when the loader is built, not after training."""
    dataset = StreamingDataset(local=str(json_dataset))
    with pytest.warns(UserWarning, match="no batch_size.*num_workers=2.*resuming mid-epoch"):
        StreamingDataLoader(dataset, batch_size=4, num_workers=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StreamingDataLoader(dataset, batch_size=4, num_workers=1)
        StreamingDataLoader(dataset, batch_size=None, num_workers=2)  # whole batches: placed
        StreamingDataLoader(StreamingDataset(local=str(json_dataset), batch_size=4),
                            batch_size=4, num_workers=2)


def test_collate_keeps_json_dicts_with_different_keys_as_a_list():
    batch = collate([{"id": 1, "meta": {"a": 1}}, {"id": 2, "meta": {"b": 2}}])
    assert batch["meta"] == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_json_dicts_with_different_keys(json_dataset, workers):
    dataset = StreamingDataset(local=str(json_dataset), batch_size=6)
    loader = StreamingDataLoader(dataset, batch_size=6, num_workers=workers)
    seen = {}
    for batch in loader:
        assert isinstance(batch["meta"], list)
        seen.update(zip(batch["id"].tolist(), batch["meta"]))
    assert seen == {i: METAS[i % len(METAS)] for i in range(36)}


class _Counting(torch.utils.data.IterableDataset):
    """Any iterable dataset: no length, or one that refuses to say."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse

    def __iter__(self):
        return iter(range(10))

    def __len__(self) -> int:
        if self.refuse:
            raise NotImplementedError("no length")
        raise TypeError("no length")


@pytest.mark.parametrize("refuse", [False, True])
def test_datasets_without_a_length_iterate(refuse: bool) -> None:
    loader = StreamingDataLoader(_Counting(refuse), batch_size=4)
    assert [len(b) for b in loader] == [4, 4, 2]
