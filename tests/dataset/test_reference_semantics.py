"""StreamingDataset meets a reference user's expectations: mixing an unweighted stream beside a
weighted one, the reference's warnings, and resuming from a state the reference saved."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from streaming import Stream, StreamingDataset
from streaming.errors import StateMismatchError
from tests.support.datasets import write_ids

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


@pytest.fixture
def two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return write_ids(tmp_path / "a", 30, size_limit=400), write_ids(
        tmp_path / "b", 20, start=1000, size_limit=400)


def ids_of(ds: StreamingDataset) -> list[int]:
    return [int(sample["id"]) for sample in ds]


def test_an_unweighted_stream_beside_a_weighted_one_counts_as_repeat_one(two_dirs) -> None:
    a, b = two_dirs
    ds = StreamingDataset(streams=[Stream(local=a, repeat=2), Stream(local=b)], batch_size=5)
    seen = ids_of(ds)
    assert ds.epoch_size == 80 and len(seen) == 80
    # Whole passes over each shard of the repeated stream, shard after shard (as the reference).
    passes, lo = [], 0
    for n in ds.samples_per_shard[:ds.shards_per_stream[0]].tolist():
        passes += list(range(lo, lo + n)) * 2
        lo += n
    assert seen[:60] == passes
    assert seen[60:] == list(range(1000, 1020))


def test_one_rank_epoch_is_every_sample_once_and_drop_last_drops_the_tail(two_dirs) -> None:
    a, _ = two_dirs
    ds = StreamingDataset(local=a, batch_size=4, num_canonical_nodes=3)
    assert sorted(ids_of(ds)) == list(range(30)) and len(ds) == 30
    kept = [b["id"].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)]
    assert len(kept) == 7 and all(len(b) == 4 for b in kept)


def test_predownload_smaller_than_batch_size_warns(two_dirs) -> None:
    a, _ = two_dirs
    with pytest.warns(UserWarning, match=r"predownload < batch_size \(4 < 8\)"):
        StreamingDataset(local=a, batch_size=8, predownload=4)


def test_resumes_from_a_state_the_reference_saved(two_dirs) -> None:
    a, _ = two_dirs
    ds = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    full = ids_of(ds)
    state = {"epoch": 0, "sample_in_epoch": 12, "num_canonical_nodes": 1, "shuffle_seed": 7,
             "initial_physical_nodes": 1}  # the reference's keys, no fingerprint
    resumed = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    resumed.load_state_dict(state)
    assert ids_of(resumed) == full[12:]
    ours = resumed.state_dict(0, False)
    assert {"fingerprint", "version"} <= set(ours) and set(state) <= set(ours)


def test_a_reference_state_with_another_seed_is_refused_unless_not_strict(two_dirs) -> None:
    a, _ = two_dirs
    state = {"epoch": 0, "sample_in_epoch": 8, "num_canonical_nodes": 1, "shuffle_seed": 3,
             "initial_physical_nodes": 1}
    ds = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    with pytest.raises(StateMismatchError, match="strict=False"):
        ds.load_state_dict(state)
    ds.load_state_dict(state, strict=False)  # continues the order of seed 3
    other = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=3)
    assert ids_of(ds) == ids_of(other)[8:]
    assert np.all(np.diff(sorted(ids_of(other))) == 1)


def test_a_state_on_the_epochs_last_sample_stays_in_that_epoch(two_dirs) -> None:
    """Composer's checkpoint on an epoch's last batch: `state_dict(size, True)` is the
    reference's `{epoch: 0, sample_in_epoch: size}`, and loading it ends epoch 0 at once."""
    a, _ = two_dirs
    ds = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    epochs = [ids_of(ds), ids_of(ds)]
    again = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    it = iter(again)
    for _ in range(30):
        next(it)
    state = again.state_dict(30, True)
    assert (state["epoch"], state["sample_in_epoch"]) == (0, 30)
    resumed = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    resumed.load_state_dict(state)
    assert ids_of(resumed) == []  # the rest of epoch 0
    assert ids_of(resumed) == epochs[1]


def test_a_state_with_nothing_counted_after_an_epoch_ended_starts_the_next(two_dirs) -> None:
    """Composer's `1ep` checkpoint calls `state_dict(0, True)` once the epoch ran out."""
    a, _ = two_dirs
    ds = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    fresh = ds.state_dict(0, False)  # before any iteration: epoch 0 (the reference says -1)
    assert (fresh["epoch"], fresh["sample_in_epoch"]) == (0, 0)
    epochs = [ids_of(ds), ids_of(ds)]
    once = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    ids_of(once)
    state = once.state_dict(0, True)
    assert (state["epoch"], state["sample_in_epoch"]) == (1, 0)
    resumed = StreamingDataset(local=a, batch_size=4, shuffle=True, shuffle_seed=7)
    resumed.load_state_dict(state)
    assert ids_of(resumed) == epochs[1]
    before = {"epoch": -1, "sample_in_epoch": 0, "num_canonical_nodes": 1, "shuffle_seed": 7}
    resumed.load_state_dict(before)  # the reference's state before any iteration
    assert ids_of(resumed) == epochs[0]


def test_an_index_without_shards_raises_the_references_runtime_error(tmp_path) -> None:
    (tmp_path / "index.json").write_text('{"version": 2, "shards": []}')
    with pytest.raises(RuntimeError, match="no samples"):
        StreamingDataset(local=tmp_path)


def test_a_cache_of_another_remote_raises_the_references_value_error(two_dirs, tmp_path) -> None:
    a, b = two_dirs
    StreamingDataset(remote=str(a), local=tmp_path / "cache").close()
    with pytest.raises(ValueError, match=str(b)):
        StreamingDataset(remote=str(b), local=tmp_path / "cache")


def test_an_unknown_sampling_method_carries_the_references_phrase(two_dirs) -> None:
    a, _ = two_dirs
    with pytest.raises(ValueError, match=r"Invalid sampling method: wild\..*choose one of"):
        StreamingDataset(local=a, sampling_method="wild")
    with pytest.raises(ValueError, match=r"Invalid batching method: wild\."):
        StreamingDataset(local=a, batching_method="wild")
