"""The minimum cache estimate equals a plain recount of the shards each step touches."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from streaming.cli.plan import batch_streams, load_setup
from writers.convert import convert


@pytest.fixture
def setup(tmp_path: Path):
    for name, n in (("a", 300), ("b", 120)):
        rows = [{"id": i, "text": "x" * (i % 40)} for i in range(n)]
        convert(rows, tmp_path / name, size_limit="2kb", progress=False)
    config = tmp_path / "mix.yaml"
    config.write_text(
        "streams:\n  - {local: a, proportion: 0.6}\n  - {local: b, proportion: 0.4}\n"
        "batch_size: 3\nbatching_method: random\nepoch_size: 240\nshuffle: true\n"
        "topology: {nodes: 2, ranks_per_node: 2, workers_per_rank: 2}\n"
    )
    return load_setup(config)


def _recount(ids: np.ndarray, batch: int, offsets: np.ndarray, resident: np.ndarray,
             transient: np.ndarray) -> int:
    """The most bytes one step of lock-step readers needs, a step being one batch of each
    reader: the distinct shards of every reader's batch, plus the largest of their transients."""
    readers = ids.reshape(-1, ids.shape[-1])
    worst = 0
    for step in range(readers.shape[1] // batch):
        chunk = readers[:, step * batch:(step + 1) * batch].ravel()
        shards = {int(np.searchsorted(offsets, i, side="right") - 1) for i in chunk if i >= 0}
        need = sum(int(resident[s]) for s in shards) + max(
            (int(transient[s]) for s in shards), default=0)
        worst = max(worst, need)
    return worst


def test_min_cache_is_the_lock_step_recount_of_the_plan_the_dataset_checks(setup, cli):
    from streaming.cache.policy.plan_fit import fit_plan
    from streaming.cli.plan_cost import run_spec
    from streaming.observe.forecast import SMALLEST_LIMIT, job_minimum
    from streaming.plan import plan_node

    args = argparse.Namespace(cache_limit=None, predownload=None, epochs=None, jobs=None,
                              nodes=None)
    spec, _ = run_spec(args, setup)
    config = fit_plan(spec.config, spec.world, spec.footprint, SMALLEST_LIMIT).config
    offsets = config.shard_offsets
    one_reader = dataclasses.replace(setup.world, workers_per_rank=1)  # as the dataset checks
    expected = max(
        _recount(plan_node(config, one_reader.with_position(node), 0).ids,
                 config.device_batch(), offsets, spec.footprint.resident,
                 spec.footprint.transient)
        for node in range(setup.world.num_nodes))
    found = job_minimum(spec)
    assert found.bytes == expected + spec.other_bytes > spec.other_bytes
    # never above what holds every shard a node reads, nor the whole data plus other files
    assert found.bytes <= found.whole <= int(spec.footprint.resident.sum()
                                              + spec.footprint.transient.max() + spec.other_bytes)


def test_batch_streams_shape_and_mix(setup):
    from streaming.plan import global_order

    streams = batch_streams(setup, global_order(setup.cfg, 0, setup.world), 10)
    assert streams.shape == (10, 3 * 4)
    assert set(np.unique(streams)) <= {0, 1}
