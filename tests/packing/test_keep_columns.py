"""`keep_columns`: a user's own columns ride along with packed batches, one value per entry of
`sample_ids` (split pieces included), through DataLoader workers and in both packing modes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from streaming import PackedStreamingDataset, StreamingDataLoader
from streaming.errors import PlanError
from streaming.packing.precomputed import PackedDataset
from writers.mds import MDSWriter

SAMPLES = 120


def doc_id(i: int) -> int:
    return 900_000 + 7 * i  # the user's own ids: not the global sample ids


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("keep") / "docs"
    rng = np.random.default_rng(3)
    columns = {"tokens": "ndarray:int32", "doc_id": "int", "url": "str"}
    with MDSWriter(columns=columns, out=out, size_limit=1 << 13, lengths="tokens") as writer:
        for i, size in enumerate(rng.integers(1, 200, SAMPLES).tolist()):
            writer.write({"tokens": np.full(size, i, np.int32), "doc_id": doc_id(i),
                          "url": f"https://example.org/{i}"})
    return out


def _assert_kept_columns(batch: dict) -> None:
    ids = batch["sample_ids"].tolist()
    assert isinstance(batch["doc_id"], torch.Tensor)
    assert batch["doc_id"].tolist() == [doc_id(i) for i in ids]
    assert batch["url"] == [f"https://example.org/{i}" for i in ids]


@pytest.mark.parametrize("workers", [0, 2])
def test_streaming_packs_carry_the_kept_columns(docs: Path, tmp_path: Path, workers: int):
    ds = PackedStreamingDataset(local=str(docs), shuffle=True, batch_size=1, packing_length=256,
                                packs_per_batch=2, keep_columns=["doc_id", "url"])
    seen = []
    for batch in StreamingDataLoader(ds, batch_size=None, num_workers=workers):
        _assert_kept_columns(batch)
        seen += batch["sample_ids"].tolist()
    assert sorted(seen) == list(range(SAMPLES))


def test_split_pieces_repeat_the_value_as_sample_ids_do(docs: Path):
    ds = PackedStreamingDataset(local=str(docs), batch_size=1, packing_length=64,
                                filter_overlong=False, overlong="split", keep_columns="doc_id")
    batches = list(ds)
    ids = [i for b in batches for i in b["sample_ids"].tolist()]
    assert len(ids) > len(set(ids))  # some samples were split into pieces
    for batch in batches:
        assert batch["doc_id"].tolist() == [doc_id(i) for i in batch["sample_ids"].tolist()]


def test_precomputed_packs_carry_the_kept_columns(docs: Path):
    packed = PackedDataset(str(docs), packing_length=256, rank=0, num_ranks=1,
                           keep_columns=["doc_id", "url"])
    for k in range(len(packed)):
        _assert_kept_columns(packed[k])
    both = packed.batch([0, 1])
    ids = packed[0]["sample_ids"].tolist() + packed[1]["sample_ids"].tolist()
    assert both["doc_id"].tolist() == [doc_id(i) for i in ids]


def test_without_keep_columns_a_batch_has_only_the_packing_keys(docs: Path):
    batch = next(iter(PackedStreamingDataset(local=str(docs), batch_size=1, packing_length=256)))
    assert "doc_id" not in batch and "url" not in batch


@pytest.mark.parametrize("bad, message", [(["input_ids"], "key of every packed batch"),
                                          (["doc_id", "doc_id"], "twice"), ([3], "column names")])
def test_bad_keep_columns_are_refused_at_construction(docs: Path, bad, message):
    with pytest.raises(PlanError, match=message):
        PackedStreamingDataset(local=str(docs), batch_size=1, keep_columns=bad)
    with pytest.raises(PlanError, match=message):
        PackedDataset(str(docs), rank=0, num_ranks=1, keep_columns=bad)


def test_a_missing_column_is_named(docs: Path):
    ds = PackedStreamingDataset(local=str(docs), batch_size=1, packing_length=256,
                                keep_columns=["title"])
    with pytest.raises(PlanError, match=r"no column 'title'.*'doc_id'"):
        next(iter(ds))
