"""StreamingDataset API in one process: random access, attributes, iteration, resumption."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from streaming import Stream, StreamingDataLoader, StreamingDataset
from streaming.errors import PlanError, StateMismatchError
from tests.support.datasets import write_ids
from tests.support.loaders import take

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


@pytest.fixture
def two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return write_ids(tmp_path / "a", 120, size_limit=500), write_ids(
        tmp_path / "b", 80, start=1000, size_limit=500, compression="zstd")


def test_random_access_and_attributes(two_dirs) -> None:
    a, b = two_dirs
    ds = StreamingDataset(streams=[Stream(local=a), Stream(local=b)], batch_size=4)
    assert ds.size == ds.num_samples == 200 and ds.epoch_size == 200 and len(ds) == 200
    assert ds[0]["id"] == 0 and ds[120]["id"] == 1000 and ds[-1]["id"] == 1079
    assert [s["id"] for s in ds[118:122]] == [118, 119, 1000, 1001]
    assert [s["id"] for s in ds[np.array([3, 150])]] == [3, 1030]
    assert list(ds.samples_per_stream) == [120, 80]
    assert ds.shards_per_stream.sum() == len(ds.samples_per_shard) == len(ds.stream_per_shard)
    assert ds.shard_offset_per_stream[1] == ds.shards_per_stream[0]
    shard, _ = ds.spanner[150]
    assert ds.stream_per_shard[shard] == 1
    assert np.array_equal(ds[150]["payload"], np.full(3, 1030))
    with pytest.raises(IndexError):
        ds[200]
    with pytest.raises(TypeError):
        ds["x"]


def test_errors_at_construction(tmp_path: Path, two_dirs) -> None:
    a, _ = two_dirs
    with pytest.raises(PlanError, match="batch_size"):
        StreamingDataset(local=a, batching_method="stratified")
    with pytest.raises(PlanError, match="not both"):
        StreamingDataset(streams=[Stream(local=a)], local=a)
    with pytest.raises(PlanError, match="needs `streams`, `remote` or `local`"):
        StreamingDataset()
    with pytest.raises(PlanError, match="`streams` is empty"):
        StreamingDataset(streams=[])
    with pytest.raises(PlanError, match="must hold Stream objects, got str"):
        StreamingDataset(streams=[str(a)])
    with pytest.raises(PlanError, match=r"cache_limit must be a positive size .* got 0"):
        StreamingDataset(remote=str(a), local=str(tmp_path / "c"), cache_limit=0)
    with pytest.raises(PlanError, match="cache_limit='lots': cannot parse byte size"):
        StreamingDataset(remote=str(a), local=str(tmp_path / "c"), cache_limit="lots")
    with pytest.raises(PlanError, match="predownload must be >= 0, got -1"):
        StreamingDataset(local=a, predownload=-1)
    with pytest.raises(PlanError, match="stream_name"):
        StreamingDataset(local=a, stream_name="missing")
    for replication in (0, -2, 1.5):  # 0 is refused, as by the reference, not taken for 1
        with pytest.raises(PlanError, match=f"replication={replication}"):
            StreamingDataset(local=a, replication=replication)
    with pytest.raises(FileNotFoundError):
        StreamingDataset(local=tmp_path / "nothing-here")


def test_iteration_covers_epoch_and_overrides_apply(two_dirs) -> None:
    a, b = two_dirs

    class Doubled(StreamingDataset):
        def __getitem__(self, index):
            sample = super().__getitem__(index)
            return {"id": sample["id"] * 2}

    ds = Doubled(streams=[Stream(local=a), Stream(local=b)], shuffle=True, batch_size=8)
    ids = [s["id"] for s in ds]
    assert sorted(ids) == sorted(2 * i for i in list(range(120)) + list(range(1000, 1080)))
    again = [s["id"] for s in ds]
    assert sorted(again) == sorted(ids) and again != ids  # epoch 1 is reshuffled


def test_two_datasets_at_once_and_same_dir_twice(two_dirs) -> None:
    a, b = two_dirs
    first = StreamingDataset(local=a, shuffle=True)
    second = StreamingDataset(local=b)
    same_dir = StreamingDataset(local=a, shuffle=True)
    got = list(zip(first, second, same_dir))
    assert len(got) == 80  # zip stops with the shorter
    assert [x["id"] for x, _, _ in got] == [z["id"] for _, _, z in got]  # same seed, same order


def test_loader_state_resumes_without_duplicates_and_across_epochs(two_dirs) -> None:
    a, _ = two_dirs
    ds = StreamingDataset(local=a, shuffle=True, batch_size=4)
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=2)
    seen, state = take(loader, 10)
    assert state["epoch"] == 0 and state["sample_in_epoch"] == 40
    fresh = StreamingDataset(local=a, shuffle=True, batch_size=4)
    fresh_loader = StreamingDataLoader(fresh, batch_size=4, num_workers=2)
    fresh_loader.load_state_dict(state)
    rest = [i for batch in fresh_loader for i in batch["id"].tolist()]
    assert sorted(seen + rest) == list(range(120))
    assert fresh_loader.state_dict()["epoch"] == 1  # a finished epoch points at the next one
    # load_state_dict on an already iterated dataset takes effect immediately.
    ds.load_state_dict(state)
    assert [i for batch in loader for i in batch["id"].tolist()] == rest


def test_state_mismatch_and_override(two_dirs) -> None:
    a, _ = two_dirs
    state = StreamingDataset(local=a, shuffle=True).state_dict(0, False)
    other = StreamingDataset(local=a, shuffle=True, shuffle_seed=1)
    with pytest.raises(StateMismatchError):
        other.load_state_dict(state)
    other.load_state_dict(state, strict=False)
    unshuffled = StreamingDataset(local=a)
    with pytest.raises(StateMismatchError, match="fingerprint"):
        unshuffled.load_state_dict(state)


def test_persistent_workers_advance_epochs(two_dirs) -> None:
    a, _ = two_dirs
    ds = StreamingDataset(local=a, shuffle=True, batch_size=4)
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    epochs = [[i for batch in loader for i in batch["id"].tolist()] for _ in range(2)]
    assert all(sorted(e) == list(range(120)) for e in epochs)
    assert epochs[0] != epochs[1]
    solo = StreamingDataset(local=a, shuffle=True, batch_size=4)
    assert [s["id"] for s in solo] == epochs[0]  # workers reproduce the 1-process order


def test_torchdata_stateful_dataloader(two_dirs) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    a, _ = two_dirs
    ds = StreamingDataset(local=a, batch_size=4)
    loader = stateful.StatefulDataLoader(ds, batch_size=4, num_workers=0)
    it = iter(loader)
    first = [i for _ in range(3) for i in next(it)["id"].tolist()]
    state = loader.state_dict()
    resumed = stateful.StatefulDataLoader(StreamingDataset(local=a, batch_size=4), batch_size=4,
                                          num_workers=0)
    resumed.load_state_dict(state)
    rest = [i for batch in resumed for i in batch["id"].tolist()]
    assert sorted(first + rest) == list(range(120))
