"""The session on its own (a plan config and a world, no shards): resumption state round-trips
through it, and a dataset plans its node once at start-up (cache check, length, first pass)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import streaming.dataset.plan_view as plan_view_module
from streaming import StreamingDataset
from streaming.dataset.session import Session
from streaming.errors import StateMismatchError
from streaming.plan import PlanConfig, World
from tests.support.datasets import write_ids

SHARDS, PER_SHARD = 10, 30


def _config(**options) -> PlanConfig:
    return PlanConfig(samples_per_shard=np.full(SHARDS, PER_SHARD, np.int64),
                      shards_per_stream=np.array([SHARDS], np.int64), shuffle=True, **options)


def _session(folder: Path, **options) -> Session:
    folder.mkdir(parents=True, exist_ok=True)
    return Session(_config(**options), World(), [folder], detected=False)


def test_a_state_taken_mid_epoch_resumes_in_a_fresh_session(tmp_path):
    first = _session(tmp_path / "a")
    try:
        with first.run.iteration(settle=False) as it:
            assert (it.start.epoch, it.start.sample_in_epoch) == (0, 0)
            ids = first.plans.worker_sample_ids(it.start.epoch, it.start.sample_in_epoch,
                                                it.world)
            it.count(40)  # the owner yielded 40 samples
            state = first.resume.iteration_state()
            assert (state["epoch"], state["sample_in_epoch"]) == (0, 40)
            assert first.resume.state_dict(40) == state  # the loader's count says the same
            whole = first.resume.state_dict(SHARDS * PER_SHARD)  # the reference's form: epoch 0
            assert (whole["epoch"], whole["sample_in_epoch"]) == (0, SHARDS * PER_SHARD)
    finally:
        first.close()
    second = _session(tmp_path / "b")
    try:
        second.resume.load_state_dict(state)
        with second.run.iteration(settle=False) as it:
            assert (it.start.epoch, it.start.sample_in_epoch) == (0, 40)
            rest = second.plans.worker_sample_ids(it.start.epoch, it.start.sample_in_epoch,
                                                  it.world)
            assert rest.tolist() == ids[40:].tolist()
        assert second.resume.iteration_state()["epoch"] == 1  # an ended pass points at the next
    finally:
        second.close()


def test_a_state_of_another_config_is_refused_unless_not_strict(tmp_path):
    first = _session(tmp_path / "a")
    state = first.resume.state_dict(10)
    first.close()
    other = _session(tmp_path / "b", shuffle_algo="py1b")
    try:
        with pytest.raises(StateMismatchError, match="fingerprint"):
            other.resume.load_state_dict(state)
        other.resume.load_state_dict(state, strict=False)
        assert other.epochs.current() == (0, 10)
    finally:
        other.close()


def test_start_up_plans_the_node_once(tmp_path, monkeypatch):
    remote = write_ids(tmp_path / "remote", 600)
    calls: list[int] = []
    real = plan_view_module.plan_node

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_view_module, "plan_node", counting)
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True,
                          cache_limit="1gb")  # the cache checks the plan fits the limit
    try:
        assert ds.cache is not None
        assert len(ds) == 600
        assert sorted(s["id"] for s in ds) == list(range(600))
        assert len(calls) == 1
    finally:
        ds.close()
