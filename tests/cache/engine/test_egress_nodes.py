"""Bytes each node of a job downloads under a cache_limit in each of two epochs: 2 nodes, each
with a cache folder of its own, of 2 ranks (processes of their own, stepping together) of 2
DataLoader workers, reading a local-folder remote (zstd shards of 128 KiB raw, py1e) with batch
16. Each node's epoch is set against its floor (each shard the epoch reads, fetched once), the
Belady optimum from the shards the node's cache held when the epoch began, and `streaming plan
--epochs 2 --json`'s prediction for that node and epoch. The second epoch starts with what the
first left in the cache, as measured once every rank of the node had finished the first
(tests/support/cost_rank.py); the plan's second epoch starts from what its simulated first
left, the same shards in these runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming import Stream
from tests.cache.engine.conftest import EGRESS_SAMPLES
from tests.cache.engine.helpers import (
    FLOOR_BOUND,
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
    for node, (first, second) in enumerate(_run_job(case, egress_sources, tmp_path)):
        first.assert_bounds(f"{case}, node {node}, epoch 0")
        ratios = ", ".join(f"{r:.3f}" for r in second.ratios)
        print(f"{case}, node {node}, epoch 1: downloaded / floor, Belady, predicted {ratios}")
        assert second.downloaded <= FLOOR_BOUND * second.floor, (case, node, second)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "node 1's second epoch downloads 1.115x the Belady optimum from the shards its cache held "
    "at the start and 1.115x streaming plan's prediction, 3 shards more (node 0: 1.036x, "
    "0.996x), the same in repeated runs. The start is not the cause (the plan's simulated first "
    "epoch leaves the same shards as the real one). The cause: as the second epoch starts, each "
    "rank's process reads its first batch (streaming.loader.first_batch) and then its workers "
    "start, and these first readers make room by evicting held shards that no reader has "
    "announced yet (eviction sees no known next use for them), shards the node's other rank or "
    "a worker not yet started reads within the first second, so they are downloaded again. The "
    "model's readers all announce at step 0. A fix needs every process's eviction to know the "
    "node's plan for the epoch, not only the announced horizons"))
def test_a_second_epoch_is_within_the_optimum_and_the_prediction(egress_sources, tmp_path):
    case = "random, two streams, full epochs, 25%"
    for node, (_, second) in enumerate(_run_job(case, egress_sources, tmp_path)):
        second.assert_bounds(f"{case}, node {node}, epoch 1")
