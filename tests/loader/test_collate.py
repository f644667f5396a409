"""streaming.loader.default_collate and StreamingDataLoader's batch path (workers yield collated
batches)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, get_worker_info

from streaming import StreamingDataLoader, StreamingDataset
from streaming.loader.batch_stream import BatchStream
from streaming.loader.default_collate import Ragged, collate
from tests.support.loaders import take
from writers.mds import MDSWriter


def readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def test_collate_layout_and_no_readonly_warning() -> None:
    batch = [{"id": i, "f": np.float32(i / 2), "text": f"t{i}", "raw": b"x" * i,
              "img": readonly(np.full((2, 3), i, np.uint8)),
              "tokens": readonly(np.arange(i + 1, dtype=np.int32))} for i in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = collate(batch)
    assert out["id"].tolist() == [0, 1, 2, 3] and out["id"].dtype == torch.int64
    assert out["f"].dtype == torch.float32 and out["f"].tolist() == [0, 0.5, 1, 1.5]
    assert out["text"] == ["t0", "t1", "t2", "t3"] and out["raw"][2] == b"xx"
    assert out["img"].shape == (4, 2, 3) and out["img"][3].eq(3).all()
    tokens = out["tokens"]
    assert isinstance(tokens, Ragged) and len(tokens) == 4
    assert tokens.offsets.tolist() == [0, 1, 3, 6, 10] and tokens.lengths.tolist() == [1, 2, 3, 4]
    assert tokens[2].tolist() == [0, 1, 2] and [t.tolist() for t in tokens.split()][1] == [0, 1]
    assert tokens.padded(-1).tolist()[0] == [0, -1, -1, -1]
    assert tokens.to(torch.float64).values.dtype == torch.float64
    assert tokens.to(torch.float64).offsets.dtype == torch.int64
    tokens.values[0] = 7  # the batch owns writable memory
    assert batch[0]["tokens"][0] == 0


def test_collate_leaves_mixed_columns_as_lists() -> None:
    mixed = collate([{"a": np.zeros(2, np.int8), "b": 1, "c": None},
                     {"a": np.zeros(2, np.int16), "b": 2.5, "c": None}])
    assert isinstance(mixed["a"], list) and mixed["b"] == [1, 2.5] and mixed["c"] == [None] * 2
    assert collate([np.ones((2, 2)), np.ones((3, 2))]).values.shape == (5, 2)
    assert isinstance(collate([np.ones((2, 2)), np.ones((2, 3))]), list)
    assert collate([]) == []


class _Arrays(torch.utils.data.IterableDataset):
    def __iter__(self):
        for i in range(8):
            yield {"x": readonly(np.arange(i + 1, dtype=np.int64)), "shared": None}


def test_worker_batches_are_built_in_shared_memory() -> None:
    def check(batch):
        out = collate(batch)
        out["shared"] = get_worker_info() is not None and out["x"].values.is_shared()
        return out

    batches = list(DataLoader(_Arrays(), batch_size=4, num_workers=1, collate_fn=check))
    assert [b["shared"] for b in batches] == [True, True]
    assert batches[1]["x"][0].tolist() == [0, 1, 2, 3, 4]


@pytest.fixture
def tokens_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    with MDSWriter(columns={"id": "int", "text": "str", "tokens": "ndarray:int32",
                            "score": "float32"}, out=tmp_path / "d", size_limit=3000) as w:
        for i in range(203):
            w.write({"id": i, "text": f"s{i}", "score": np.float32(i),
                     "tokens": rng.integers(0, 50_000, int(rng.integers(1, 40)), dtype=np.int32)})
    return tmp_path / "d"


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, x in a.items():
        y = b[key]
        if isinstance(x, Ragged):
            assert torch.equal(x.values, y.values) and torch.equal(x.offsets, y.offsets)
        elif isinstance(x, torch.Tensor):
            assert torch.equal(x, y), key
        else:
            assert x == y, key


@pytest.mark.parametrize("workers", [0, 2])
def test_batch_path_equals_sample_path(tokens_dir: Path, workers: int) -> None:
    def make() -> StreamingDataset:
        return StreamingDataset(local=tokens_dir, shuffle=True, batch_size=8)

    ds = make()
    fast = StreamingDataLoader(ds, batch_size=8, num_workers=workers)
    assert isinstance(fast._batch_stream, BatchStream) and fast.batch_size == 8
    assert fast.dataset is ds  # the user's dataset (llm-foundry's callbacks check its type)
    assert len(fast) == 26 and fast.dataset.size == 203
    slow = DataLoader(make(), batch_size=8, num_workers=workers, collate_fn=collate)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = list(fast)
    want = list(slow)
    assert len(got) == len(want) == 26
    for a, b in zip(got, want):
        _assert_same(a, b)
    ids = [i for b in got for i in b["id"].tolist()]  # one rank: each of 203 samples once
    assert sorted(ids) == list(range(203)) and len(got[-1]["id"]) == 3


def test_batch_path_resumes_exactly_and_drops_last(tokens_dir: Path) -> None:
    ds = StreamingDataset(local=tokens_dir, shuffle=True, batch_size=8)
    seen, state = take(StreamingDataLoader(ds, batch_size=8, num_workers=2), 7)
    assert state["sample_in_epoch"] == 56
    fresh = StreamingDataLoader(StreamingDataset(local=tokens_dir, shuffle=True, batch_size=8),
                                batch_size=8, num_workers=2)
    fresh.load_state_dict(state)
    rest = [i for batch in fresh for i in batch["id"].tolist()]
    assert sorted(seen + rest) == list(range(203))
    loose = StreamingDataLoader(StreamingDataset(local=tokens_dir, batch_size=8), batch_size=48)
    assert [len(b["id"]) for b in loose] == [48] * 4 + [11] and len(loose) == 5
    dropped = StreamingDataLoader(StreamingDataset(local=tokens_dir, batch_size=8),
                                  batch_size=48, drop_last=True)
    assert [len(b["id"]) for b in dropped] == [48] * 4 and len(dropped) == 4


def test_custom_collate_and_overrides_use_the_sample_path(tokens_dir: Path) -> None:
    ds = StreamingDataset(local=tokens_dir, batch_size=8)
    custom = StreamingDataLoader(ds, batch_size=8, collate_fn=lambda b: [s["id"] for s in b])
    assert custom.dataset is ds and next(iter(custom)) == list(range(8))

    class Plus(StreamingDataset):
        def get_item(self, sample_id: int) -> dict:
            sample = super().get_item(sample_id)
            return {"id": sample["id"] + 1000}

    plus = StreamingDataLoader(Plus(local=tokens_dir, batch_size=8), batch_size=8)
    assert plus.dataset.__class__ is Plus
    assert next(iter(plus))["id"].tolist() == list(range(1000, 1008))
    unbatched = StreamingDataLoader(StreamingDataset(local=tokens_dir), batch_size=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = next(iter(unbatched))
    assert first["id"] == 0 and first["tokens"].dtype == torch.int32


@pytest.mark.parametrize("subclass", [False, True])
def test_workers_send_numpy_and_the_loop_gets_tensors(tokens_dir: Path, subclass: bool) -> None:
    class Same(StreamingDataset):
        def get_item(self, sample_id: int) -> dict:
            return super().get_item(sample_id)

    cls = Same if subclass else StreamingDataset
    loader = StreamingDataLoader(cls(local=tokens_dir, batch_size=8), batch_size=8,
                                 num_workers=2)
    assert isinstance(loader._batch_stream, BatchStream) != subclass
    assert isinstance(loader.dataset, cls)
    batches = list(loader)
    assert all(isinstance(b["id"], torch.Tensor) and isinstance(b["tokens"].values, torch.Tensor)
               and isinstance(b["tokens"].offsets, torch.Tensor) and b["score"].dtype ==
               torch.float32 for b in batches)
    assert loader.state_dict()["epoch"] == 1
    direct = list(StreamingDataLoader(cls(local=tokens_dir, batch_size=8), batch_size=8))
    for a, b in zip(batches, direct):
        _assert_same(a, b)


def test_large_worker_batches_travel_in_shared_memory(tmp_path: Path) -> None:
    with MDSWriter(columns={"id": "int", "blob": "bytes", "big": "ndarray:uint8"},
                   out=tmp_path / "b") as writer:
        for i in range(12):
            writer.write({"id": i, "blob": bytes([i]) * 300_000,
                          "big": np.full(300_000 + i, i, np.uint8)})
    small = collate([{"x": np.zeros(3)}] * 2, numpy=True)["x"]
    assert isinstance(small, np.ndarray) and small.shape == (2, 3)
    loader = StreamingDataLoader(StreamingDataset(local=tmp_path / "b", batch_size=4),
                                 batch_size=4, num_workers=2)
    loader.first_batch_in_process = False  # every batch from a worker
    batches = list(loader)
    assert [b["id"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    for b in batches:
        assert [len(x) for x in b["blob"]] == [300_000] * 4
        assert all(x == bytes([i]) * 300_000 for x, i in zip(b["blob"], b["id"].tolist()))
        assert b["big"].values.is_shared() and b["big"].lengths.tolist() == [
            300_000 + i for i in b["id"].tolist()]


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_skip_the_profiler_annotation_unless_profiling(tokens_dir: Path, workers: int,
                                                               monkeypatch) -> None:
    # torch's DataLoader wraps each batch in record_function, whose exit releases the GIL;
    # ours leaves it out unless a torch profiler records (then the trace keeps its events).
    calls = []
    real = torch.autograd.profiler.record_function

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.autograd.profiler, "record_function", counting)
    loader = StreamingDataLoader(StreamingDataset(local=tokens_dir, batch_size=8), batch_size=8,
                                 num_workers=workers)
    plain = list(loader)
    assert len(plain) == 26 and not calls
    with torch.profiler.profile() as prof:
        profiled = list(loader)
    # One per batch of torch's iterator (a worker-backed pass reads its first batch in this
    # process: streaming/loader/first_batch.py), and the StopIteration call.
    assert len(calls) == 27 - (workers > 0)
    assert any(e.key.startswith("enumerate(DataLoader)") for e in prof.key_averages())
    for a, b in zip(plain, profiled):
        _assert_same(a, b)
    assert loader.state_dict()["sample_in_epoch"] == 0  # two whole epochs, counted as such


def test_an_iterator_without_dataloader_internals_is_used_as_is() -> None:
    from streaming.loader.unannotated_next import unannotated

    assert list(unannotated(iter([1, 2, 3]))) == [1, 2, 3]
