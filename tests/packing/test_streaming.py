"""Streaming packing: workers, ranks, batching methods, exact resumption, mixing by tokens."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from streaming.dataset.streaming_dataset import StreamingDataset
from streaming.errors import ArgumentError, PlanError, StateMismatchError
from streaming.loader.dataloader import StreamingDataLoader
from streaming.packing import realised_token_shares
from streaming.packing.streaming import PackedStreamingDataset
from streaming.plan import World
from streaming.stream import Stream
from tests.support.datasets import write_tokens

N = 400


@pytest.fixture(scope="module")
def tokens_dir(tmp_path_factory) -> tuple[Path, np.ndarray]:
    root = tmp_path_factory.mktemp("packed")
    return root, write_tokens(root / "a", N, max_len=300)


def make(root: Path, **options) -> PackedStreamingDataset:
    options = {"shuffle": True, "packing_length": 512, "packs_per_batch": 2, **options}
    return PackedStreamingDataset(local=str(root / "a"), **options)


def flat(batches) -> list[int]:
    return [i for batch in batches for i in batch["sample_ids"].tolist()]


def assert_batch(batch, cap: int) -> None:
    assert (batch["pack_lengths"] <= cap).all()
    real = batch["input_ids"][batch["labels"] != -100]
    assert real.numel() <= int(batch["pack_lengths"].sum())


def test_workers_do_not_change_the_packs(tokens_dir) -> None:
    root, _ = tokens_dir
    solo = make(root)
    batches = list(solo)
    for batch in batches:
        assert_batch(batch, 512)
    ids = flat(batches)
    assert sorted(ids) == list(range(N)) and len(batches) == len(solo)
    pooled = make(root)
    loader = StreamingDataLoader(pooled, batch_size=None, num_workers=2)
    assert flat(loader) == pooled.rank_packs(0).ids.tolist() == ids
    assert flat(loader) == pooled.rank_packs(1).ids.tolist() != ids  # epoch 1 reshuffled


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_mid_epoch_continues_identically(tokens_dir, workers: int) -> None:
    root, _ = tokens_dir
    ds = make(root)
    loader = StreamingDataLoader(ds, batch_size=None, num_workers=workers)
    full = flat(loader)  # epoch 0, uninterrupted
    seen = []
    for k, batch in enumerate(loader):  # epoch 1, interrupted after 7 batches
        seen += batch["sample_ids"].tolist()
        if k == 6:
            state = loader.state_dict()
            break
    assert state["source"]["epoch"] == 1 and state["packs_in_epoch"] == 14
    fresh = make(root)
    resumed = StreamingDataLoader(fresh, batch_size=None, num_workers=workers)
    resumed.load_state_dict(state)
    rest = flat(resumed)
    assert seen + rest == fresh.rank_packs(1).ids.tolist()
    assert sorted(seen + rest) == sorted(full) == list(range(N))
    assert resumed.state_dict()["source"]["epoch"] == 2  # finished epoch points at the next


def test_resume_without_loader_and_split_pieces(tokens_dir) -> None:
    root, sizes = tokens_dir
    options = {"packing_length": 128, "filter_overlong": False, "packs_per_batch": 3}
    ds = make(root, **options)
    it = iter(ds)
    head = [next(it) for _ in range(5)]
    state = ds.state_dict()
    fresh = make(root, **options)
    fresh.load_state_dict(state)
    tail = list(fresh)
    pieces = Counter(flat(head + tail))
    assert pieces == {i: -(-int(n) // 128) for i, n in enumerate(sizes.tolist())}
    for batch in head + tail:
        assert_batch(batch, 128)


@pytest.mark.parametrize("method", ["random", "per_stream"])
def test_two_ranks_each_sample_once(tokens_dir, method: str) -> None:
    root, _ = tokens_dir
    seen = []
    ranks = [make(root, world=World(1, 2, 1, 0, r), batching_method=method, batch_size=8)
             for r in range(2)]
    steps = set()
    for ds in ranks:
        batches = list(StreamingDataLoader(ds, batch_size=None, num_workers=2))
        steps.add(len(batches))
        assert len(batches) == len(ds)
        seen += flat(batches)
    assert sorted(seen) == list(range(N))
    assert len(steps) == 1  # equal_packs: no rank waits for another at the end of the epoch


def test_state_mismatch(tokens_dir) -> None:
    root, sizes = tokens_dir
    state = make(root).state_dict(0)
    other = make(root, packing_length=256)
    with pytest.raises(StateMismatchError, match="packing state"):
        other.load_state_dict(state)
    other.load_state_dict(state, strict=False)  # restarts the epoch; overlong filtered
    assert sorted(flat(other)) == np.flatnonzero(sizes <= 256).tolist()
    with pytest.raises(StateMismatchError, match="packs_in_epoch"):
        other.load_state_dict(StreamingDataset(local=str(root / "a"), shuffle=True).state_dict(0))
    with pytest.raises(PlanError):
        make(root, packing_strategy="nope")


def test_mix_unit_tokens(tmp_path: Path) -> None:
    short = write_tokens(tmp_path / "short", 300, max_len=40, seed=1)
    long = write_tokens(tmp_path / "long", 100, max_len=400, seed=2, start=1000)
    streams = [Stream(local=str(tmp_path / "short"), proportion=0.5),
               Stream(local=str(tmp_path / "long"), proportion=0.5)]
    by_tokens = StreamingDataset(streams=streams, mix_unit="tokens", epoch_size=200)
    counts = [s.choose for s in by_tokens.streams]
    assert sum(counts) == 200 and counts[0] > counts[1]
    expected = realised_token_shares(counts, [short.sum(), long.sum()], [300, 100])
    np.testing.assert_allclose(expected, [0.5, 0.5], atol=0.01)
    measured = by_tokens.token_shares()
    assert abs(measured[0] - 0.5) < 0.1  # the drawn samples, not the means
    by_samples = StreamingDataset(streams=streams, epoch_size=200)
    assert by_samples.token_shares()[0] < 0.25
    with pytest.raises(PlanError, match="mix_unit"):
        StreamingDataset(streams=streams, mix_unit="bytes")


RESUME_SCRIPT = """
import json, sys
from streaming.loader.dataloader import StreamingDataLoader
from streaming.packing.streaming import PackedStreamingDataset
ds = PackedStreamingDataset(local=sys.argv[1], shuffle=True, packing_length=512,
                            packs_per_batch=2)
loader = StreamingDataLoader(ds, batch_size=None, num_workers=2)
loader.load_state_dict(json.loads(sys.argv[2]))
print(json.dumps([i for b in loader for i in b["sample_ids"].tolist()]))
"""


@pytest.mark.slow
def test_resume_in_a_new_process(tokens_dir) -> None:
    import json
    import os
    import subprocess
    import sys

    root, _ = tokens_dir
    ds = make(root)
    loader = StreamingDataLoader(ds, batch_size=None, num_workers=2)
    seen = []
    for k, batch in enumerate(loader):
        seen += batch["sample_ids"].tolist()
        if k == 10:
            state = loader.state_dict()
            break
    repo = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=repo, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, str(root / "a"),
                          json.dumps(state)], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    rest = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen + rest == ds.rank_packs(0).ids.tolist()
    assert not set(seen) & set(rest) and sorted(seen + rest) == list(range(N))


def test_the_packed_dataset_builds_its_streaming_source(tokens_dir) -> None:
    root, _ = tokens_dir
    built = PackedStreamingDataset(local=str(root / "a"), packing_length=512, packs_per_batch=2,
                                   shuffle=True)
    assert type(built.source) is StreamingDataset
    source = StreamingDataset(local=str(root / "a"), shuffle=True)
    explicit = PackedStreamingDataset(source=source, packing_length=512, packs_per_batch=2)
    assert flat(built) == flat(explicit)
    plain = StreamingDataset(local=str(root / "a"), packing=False)
    assert type(plain) is StreamingDataset

    class Mine(StreamingDataset):
        pass

    for kind in (StreamingDataset, Mine):  # the old spelling names the one that packs
        with pytest.raises(ArgumentError, match=r"does not pack.*PackedStreamingDataset\("):
            kind(local=str(root / "a"), packing=True)
    with pytest.raises(ValueError, match="always packs"):
        PackedStreamingDataset(local=str(root / "a"), packing=False)


@pytest.mark.parametrize(("kind", "workers"), [("ours", 0), ("ours", 2), ("torch", 2)])
def test_len_is_the_running_or_next_epochs_batches(tokens_dir, kind: str, workers: int) -> None:
    root, _ = tokens_dir  # window_10 at 600 tokens packs each epoch's order into another count
    ds = make(root, packing_length=600, packing_strategy="window_10", packs_per_batch=1)
    make_loader = StreamingDataLoader if kind == "ours" else DataLoader
    loader = make_loader(ds, batch_size=None, num_workers=workers)
    counts = [ds.pack_count(epoch) for epoch in range(4)]
    assert len(set(counts)) > 1
    promised, got = [], []
    for _ in range(3):
        promised.append(len(loader))
        got.append(0)
        for _ in loader:
            got[-1] += 1
            if kind == "ours":  # torch's loader asks the dataset, whose workers run ahead
                assert len(loader) == promised[-1]  # while the epoch runs: its own count
    assert promised == got == counts[:3]
    assert len(loader) == counts[3]  # between epochs: the next one's
