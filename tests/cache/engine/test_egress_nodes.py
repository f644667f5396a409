"""Bytes each node of a job downloads under a cache_limit in each of two epochs: 2 nodes, each
with a cache folder of its own, of 2 ranks (processes of their own, stepping together) of 2
DataLoader workers, reading a local-folder remote (zstd shards of 128 KiB raw, py1e) with batch
16. Each node's epoch is set against its floor (each shard the epoch reads, fetched once), the
Belady optimum from the shards the node's cache held when the epoch began, and `streaming plan
--epochs 2 --json`'s prediction for that node and epoch. The second epoch starts with what the
first left in the cache, as measured once every rank of the node had finished the first
(tests/support/cost_rank.py); the plan's second epoch starts from what its simulated first
left, the same shards, or all but one, in these runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming import Stream
from tests.cache.engine.conftest import EGRESS_SAMPLES
from tests.cache.engine.helpers import (
    Egress,
    plan_json,
    ran_config,
    raw_bytes,
    run_ranks,
    shard_costs,
)

NODES, RANKS, WORKERS, EPOCHS = 2, 2, 2, 2
CASES = {  # batching, proportions, limit (share of the raw data or "2x min"), epoch_size
    "random, two streams, full epochs, 25%": ("random", None, 0.25, None),
    "stratified, 70/30 mix, epoch_size 50%, 2x the minimum":
        ("stratified", (0.7, 0.3), "2x min", 0.5),
}


def _run_job(case: str, sources: list[Path], folder: Path) -> list[list[Egress]]:
    """Run `case` as a job of `NODES` x `RANKS` ranks for `EPOCHS` epochs in `folder`; each
    node's `Egress` of each epoch (the whole of every epoch read, the limit roomy)."""
    from streaming.cli.plan import load_setup

    method, proportions, share, size = CASES[case]
    streams = [Stream(remote=str(f), local=str(folder / "local" / "node0" / f.name),
                      proportion=None if proportions is None else proportions[i])
               for i, f in enumerate(sources)]
    settings = {"batching_method": method, "shuffle_algo": "py1e", "shuffle_seed": 7,
                "predownload": 64,
                "epoch_size": None if size is None else int(EGRESS_SAMPLES * 2 * size)}
    shape = {"ranks": RANKS, "nodes": NODES, "epochs": EPOCHS}
    limit = (2 * plan_json(folder, streams, None, WORKERS, settings, **shape)["min_cache_bytes"]
             if share == "2x min" else int(raw_bytes(sources) * share))
    plan = plan_json(folder, streams, limit, WORKERS, settings, **shape)
    reports = run_ranks(folder, sources, proportions, limit, WORKERS, settings,
                        nodes=NODES, ranks=RANKS, epochs=EPOCHS)
    setup = load_setup(folder / "run.yaml")  # the config `streaming plan` read
    footprint, fetch = shard_costs(sources, streams)
    out, planned = [], 0
    for node, report in enumerate(reports):
        config = ran_config(setup.cfg, report)
        assert len(report["epochs"]) == EPOCHS
        before, held, epochs = 0, None, []
        for epoch, end in enumerate(report["epochs"]):
            egress = Egress.measure(end["bytes_downloaded"] - before, config, setup.world,
                                    footprint, fetch, limit, plan, node=node, epoch=epoch,
                                    held=held)
            assert egress.roomy, (limit, plan["min_cache_bytes"])
            epochs.append(egress)
            planned += egress.planned
            before, held = end["bytes_downloaded"], np.asarray(end["held"], np.int64)
        assert before == report["bytes_downloaded"]
        out.append(epochs)
    assert reports[0]["job_samples_read"] == planned  # every epoch of every node read whole
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_each_node_downloads_near_its_floor_in_each_epoch(egress_sources, tmp_path, case):
    """Each node's each epoch within the three bounds. The second epoch's optimum and
    prediction failed (node 1 of the first case 1.115x both) while each rank's process read
    the epoch's first batch itself: under the limit, with the cache full of the first epoch's
    shards, that read made room before the node's other readers had announced theirs, and
    evicted shards they read at once (streaming.loader.first_batch)."""
    for node, epochs in enumerate(_run_job(case, egress_sources, tmp_path)):
        for epoch, egress in enumerate(epochs):
            egress.assert_bounds(f"{case}, node {node}, epoch {epoch}")
