"""The minimum cache estimate equals a plain recount of the shards each step touches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming.cli.plan import batch_streams, load_setup, min_cache_bytes
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


def test_min_cache_matches_a_plain_recount(setup):
    from streaming.plan import plan_node

    cost = np.concatenate([ix.raw_bytes + ix.zip_bytes for ix in setup.indexes])
    offsets = setup.cfg.shard_offsets
    expected = 0
    for node in range(setup.world.num_nodes):
        ids = plan_node(setup.cfg, setup.world.with_position(node), 0).ids
        batch = setup.cfg.device_batch()
        for step in range(ids.shape[2] // batch):
            chunk = ids[:, :, step * batch:(step + 1) * batch].ravel()
            shards = {int(np.searchsorted(offsets, i, side="right") - 1) for i in chunk if i >= 0}
            expected = max(expected, int(sum(cost[s] for s in shards)))
    got, node = min_cache_bytes(setup, 0)
    assert got == expected > 0
    assert min_cache_bytes(setup, 0, jobs=2) == (got, node)  # the nodes planned in a pool


def test_batch_streams_shape_and_mix(setup):
    from streaming.plan import global_order

    streams = batch_streams(setup, global_order(setup.cfg, 0, setup.world), 10)
    assert streams.shape == (10, 3 * 4)
    assert set(np.unique(streams)) <= {0, 1}
