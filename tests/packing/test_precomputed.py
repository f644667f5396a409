"""Precomputed packing: every sample once per epoch over all ranks, capacity, determinism."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import PlanError
from streaming.packing.precomputed import PackedDataset, epoch_packs, rank_packs
from tests.support.datasets import write_tokens


def expected_occurrences(lengths: np.ndarray, cap: int, filter_overlong: bool,
                         overlong: str) -> Counter:
    out: Counter = Counter()
    for i, n in enumerate(lengths.tolist()):
        if n <= cap:
            out[i] = 1
        elif not filter_overlong:
            out[i] = 1 if overlong == "alone" else n // cap + (1 if n % cap else 0)
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.lists(st.integers(0, 80), max_size=80), st.integers(1, 4),
       st.sampled_from(["best_fit", "first_fit", "window_4", "offline_bfd"]),
       st.booleans(), st.sampled_from(["split", "alone"]), st.integers(0, 3))
def test_every_sample_once_over_ranks(cap, lengths, ranks, strategy, filt, overlong, epoch):
    lengths = np.array(lengths, np.int64)
    plan = epoch_packs(lengths, cap, strategy, seed=5, epoch=epoch, ranks=ranks,
                       filter_overlong=filt, overlong=overlong)
    assert plan.num_packs % ranks == 0
    shares = [rank_packs(plan, r, ranks) for r in range(ranks)]
    assert len({s.num_packs for s in shares}) == 1
    seen = Counter(i for s in shares for i in s.ids.tolist())
    assert seen == expected_occurrences(lengths, cap, filt, overlong)
    tokens = plan.tokens(lengths, cap, not filt and overlong == "split")
    if filt or overlong == "split":
        assert (tokens <= cap).all()
    assert tokens.sum() == sum(n for n in lengths.tolist() if n <= cap or not filt)
    again = epoch_packs(lengths, cap, strategy, seed=5, epoch=epoch, ranks=ranks,
                        filter_overlong=filt, overlong=overlong)
    np.testing.assert_array_equal(again.ids, plan.ids)


def test_epochs_differ_and_bad_rank() -> None:
    lengths = np.arange(1, 200) % 37 + 1
    a = epoch_packs(lengths, 64, epoch=0, ranks=2)
    b = epoch_packs(lengths, 64, epoch=1, ranks=2)
    assert a.ids.tolist() != b.ids.tolist() and sorted(a.ids) == sorted(b.ids)
    with pytest.raises(PlanError):
        rank_packs(a, 2, 2)
    with pytest.raises(PlanError):
        epoch_packs(lengths, 64, ranks=0)


def test_packed_dataset_tokens_and_ranks(tmp_path: Path) -> None:
    sizes = write_tokens(tmp_path / "d", 300, max_len=200)
    ds = LocalDataset(tmp_path / "d")
    seen: list[int] = []
    lengths = set()
    for rank in range(3):
        packed = PackedDataset(ds, packing_length=128, rank=rank, num_ranks=3,
                               filter_overlong=False, seed=1)
        lengths.add(len(packed))
        assert packed.stats().fill_rate > 0.9
        for k in range(len(packed)):
            item = packed[k]
            ids = item["sample_ids"].tolist()
            assert int(item["pack_lengths"].sum()) <= 128
            tokens = item["input_ids"].numpy()
            # every token of the pack belongs to one of its samples, in order
            assert [int(t) for t in np.unique(tokens, return_index=True)[0]] == sorted(set(ids))
            seen += ids
    assert len(lengths) == 1
    pieces = Counter(seen)
    assert pieces == {i: -(-int(n) // 128) for i, n in enumerate(sizes.tolist())}


def test_set_epoch_replans_deterministically(tmp_path: Path) -> None:
    write_tokens(tmp_path / "d", 120, max_len=200)
    a = PackedDataset(str(tmp_path / "d"), packing_length=256, rank=0, num_ranks=1)
    b = PackedDataset(str(tmp_path / "d"), packing_length=256, rank=0, num_ranks=1)
    first = [a[k]["sample_ids"].tolist() for k in range(len(a))]
    assert first == [b[k]["sample_ids"].tolist() for k in range(len(b))]
    a.set_epoch(1)
    second = [a[k]["sample_ids"].tolist() for k in range(len(a))]
    assert second != first and sorted(i for p in second for i in p) == list(range(120))
    batch = a.batch([0, 1])
    assert batch["input_ids"].shape[0] == 2


def test_packed_dataset_over_a_streaming_dataset(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    from streaming.dataset.streaming_dataset import StreamingDataset

    write_tokens(tmp_path / "d", 150, max_len=100, lengths=None)
    source = StreamingDataset(local=str(tmp_path / "d"))
    packed = PackedDataset(source, packing_length=256, rank=1, num_ranks=2)
    other = PackedDataset(source, packing_length=256, rank=0, num_ranks=2)
    assert len(packed) == len(other)
    loader = DataLoader(packed, batch_size=None, num_workers=2)
    seen = [i for item in loader for i in item["sample_ids"].tolist()]
    seen += [i for k in range(len(other)) for i in other[k]["sample_ids"].tolist()]
    assert sorted(seen) == list(range(150))
