"""Unit tests of the pieces under StreamingDataset: locator, streams, state, shard preparation."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from streaming.cache.prepare.preparer import ShardPreparer
from streaming.cache.shard_facts import ShardFacts
from streaming.dataset.state import ResumeState
from streaming.errors import (
    HashMismatchError,
    ObjectNotFoundError,
    PlanError,
    ShardCorruptError,
    StateMismatchError,
)
from streaming.format.index import read_index
from streaming.loader.default_collate import batch_length
from streaming.read.sample_locator import SampleLocator
from streaming.stream import Stream, register_stream, stream_class
from tests.support.datasets import write_ids


@given(st.lists(st.integers(0, 50), min_size=1, max_size=30), st.data())
def test_sample_locator_matches_a_naive_table(sizes: list[int], data) -> None:
    locator = SampleLocator(np.array(sizes))
    table = [(s, r) for s, n in enumerate(sizes) for r in range(n)]
    assert len(locator) == len(table)
    if not table:
        return
    ids = np.array(data.draw(st.lists(st.integers(0, len(table) - 1), max_size=40)), np.int64)
    shards, rows = locator.locate(ids)
    assert [(int(s), int(r)) for s, r in zip(shards, rows)] == [table[i] for i in ids]
    i = data.draw(st.integers(-len(table), len(table) - 1))
    assert locator[i] == table[i]


def test_sample_locator_rejects_out_of_range() -> None:
    locator = SampleLocator(np.array([3, 0, 2]))
    with pytest.raises(IndexError, match="5"):
        locator[5]
    with pytest.raises(IndexError, match="-1"):
        locator.locate(np.array([0, -1]))


def test_stream_paths_split_and_knob_inheritance(tmp_path: Path) -> None:
    s = Stream(remote=f"file://{tmp_path}/src", local=tmp_path / "cache", split="train",
               download_retry=5)
    s.apply_defaults(download_retry=2, download_timeout=9, validate_hash=None, keep_zip=True)
    assert s.local_dir == (tmp_path / "cache" / "train").resolve()
    assert s.remote_url("index.json") == f"file://{tmp_path}/src/train/index.json"
    assert (s.download_retry, s.download_timeout, s.keep_zip) == (5, 9, True)
    assert Stream(local=tmp_path).remote_dir is None
    assert Stream(remote=tmp_path, local=tmp_path).remote_dir is None  # remote == local
    with pytest.raises(PlanError, match=r"(?i)at most one"):
        Stream(local=tmp_path, proportion=0.5, repeat=2)
    with pytest.raises(PlanError):
        Stream()


def test_stream_registry() -> None:
    class Mine(Stream):
        pass

    register_stream("mine-test", Mine)
    assert stream_class("mine-test") is Mine
    with pytest.raises(PlanError, match="mine-test"):
        stream_class("nope")
    with pytest.raises(TypeError):
        register_stream("bad", dict)  # type: ignore[arg-type]


def test_resume_state_round_trip_and_checks() -> None:
    state = ResumeState(2, 96, 4, 9176, "abc")
    assert ResumeState.from_dict(state.to_dict()) == state
    state.check("abc")
    with pytest.raises(StateMismatchError, match="strict=False"):
        state.check("xyz")
    state.check("xyz", strict=False)
    legacy = ResumeState.from_dict({"epoch": 1, "sample_in_epoch": 5, "num_canonical_nodes": 2,
                                    "shuffle_seed": 3, "initial_physical_nodes": 2})
    legacy.check("anything")  # the reference's states carry no fingerprint
    # the reference's state before any iteration is epoch -1 at 0: it loads as epoch 0
    assert ResumeState.from_dict({"epoch": -1, "sample_in_epoch": 0}).epoch == 0
    for bad in ({"epoch": 1}, {"epoch": -1, "sample_in_epoch": 3}, {"epoch": -2,
                "sample_in_epoch": 0}, [1, 2], {"epoch": "x", "sample_in_epoch": 0}):
        with pytest.raises(StateMismatchError):
            ResumeState.from_dict(bad)  # type: ignore[arg-type]


def test_batch_length_of_common_collations() -> None:
    assert batch_length({"id": torch.arange(5), "x": [1, 2]}) == 5
    assert batch_length([torch.zeros(3, 2), torch.zeros(3)]) == 3
    assert batch_length(["a", "b"]) == 2
    assert batch_length(np.zeros((4, 2))) == 4


def _preparer(stream: Stream) -> ShardPreparer:
    stream.apply_defaults(download_retry=0, download_timeout=10, validate_hash=None,
                          keep_zip=False)
    index = read_index(stream.index_file())
    return ShardPreparer([stream], ShardFacts.from_indexes([index]))


def test_prepare_copies_and_decompresses_from_a_file_remote(tmp_path: Path) -> None:
    write_ids(tmp_path / "src", 50, compression="zstd", hashes=["sha1"])
    stream = Stream(remote=f"file://{tmp_path}/src", local=tmp_path / "node0",
                    validate_hash="sha1")
    prep = _preparer(stream)
    path = prep.prepare(0)
    assert path.parent == (tmp_path / "node0").resolve()
    assert path.stat().st_size == int(prep.facts.raw_bytes[0])
    assert not (path.parent / prep.facts.zip_basenames[0]).exists()  # keep_zip=False
    assert sorted(os.listdir(tmp_path / "src")) == sorted(os.listdir(tmp_path / "src"))
    assert prep.prepare(0) == path  # idempotent


def test_prepare_in_place_never_deletes_local_data(tmp_path: Path) -> None:
    write_ids(tmp_path / "src", 50, compression="zstd")
    before = set(os.listdir(tmp_path / "src"))
    prep = _preparer(Stream(local=tmp_path / "src"))
    prep.prepare(1)
    after = set(os.listdir(tmp_path / "src"))
    assert before < after  # the raw shard was added, nothing removed


def test_prepare_errors_name_the_shard(tmp_path: Path) -> None:
    write_ids(tmp_path / "src", 50)
    prep = _preparer(Stream(local=tmp_path / "src"))
    (tmp_path / "src" / prep.facts.basenames[0]).unlink()
    with pytest.raises(ObjectNotFoundError, match=prep.facts.basenames[0]):
        prep.prepare(0)

    write_ids(tmp_path / "hashed", 50, compression="zstd", hashes=["sha1"])
    zipped = tmp_path / "hashed" / read_index(tmp_path / "hashed" / "index.json").zip_basenames[0]
    data = bytearray(zipped.read_bytes())
    data[-1] ^= 0xFF
    zipped.write_bytes(bytes(data))
    stream = Stream(local=tmp_path / "hashed", validate_hash="sha1")
    with pytest.raises((HashMismatchError, ShardCorruptError), match=r"shard\.00000"):
        _preparer(stream).prepare(0)
