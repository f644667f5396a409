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
from tests.dataset.conftest import write_ids

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
    with pytest.warns(UserWarning, match="predownload"):
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
