"""Bytes a real epoch downloads under a cache_limit for every batching method and every shuffle
algorithm that can be fitted to a limit (`naive` cannot), against the floor (each shard the
node's epoch reads, fetched once), the Belady optimum for the node's plan, and `streaming plan
--json`'s prediction for the same config: one process with 2 DataLoader workers (batch 16, zstd
shards of 128 KiB raw, a local-folder remote), and one node of 2 ranks in processes of their
own. test_egress.py covers `random` batching with `py1e`."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import Stream
from streaming.plan import World
from tests.cache.engine.conftest import EGRESS_SAMPLES
from tests.cache.engine.helpers import (
    Egress,
    fetch_bytes,
    plan_json,
    ran_config,
    raw_bytes,
    run_epoch,
    run_ranks,
    shard_costs,
)

WORKERS = 2

CASES = {  # batching, shuffle, streams, proportions, limit (share of the raw data or "2x min"),
    # epoch_size (share of the stored samples)
    "stratified, two streams, 25%": ("stratified", "py1e", 2, None, 0.25, None),
    "per_stream, two streams, 25%": ("per_stream", "py1e", 2, None, 0.25, None),
    "device_per_stream, two streams, 25%": ("device_per_stream", "py1e", 2, None, 0.25, None),
    "stratified, 70/30 mix, epoch_size 50%, 2x the minimum":
        ("stratified", "py1e", 2, (0.7, 0.3), "2x min", 0.5),
    "per_stream, 70/30 mix, epoch_size 50%, 2x the minimum":
        ("per_stream", "py1e", 2, (0.7, 0.3), "2x min", 0.5),
    "device_per_stream, 70/30 mix, epoch_size 50%, 2x the minimum":
        ("device_per_stream", "py1e", 2, (0.7, 0.3), "2x min", 0.5),
    "py1b, 25%": ("random", "py1b", 1, None, 0.25, None),
    "py1br, 25%": ("random", "py1br", 1, None, 0.25, None),
    "py1s, 25%": ("random", "py1s", 1, None, 0.25, None),
    "py2s, 25%": ("random", "py2s", 1, None, 0.25, None),
    "py1s, epoch_size 30%, 2x the minimum": ("random", "py1s", 1, None, "2x min", 0.3),
    "py2s, 2x the minimum": ("random", "py2s", 1, None, "2x min", None),
    "py1b, 2x the minimum": ("random", "py1b", 1, None, "2x min", None),
    "py1br, epoch_size 50%, 2x the minimum": ("random", "py1br", 1, None, "2x min", 0.5),
}


def _streams(folders: list[Path], local: Path, proportions: tuple[float, ...] | None
             ) -> list[Stream]:
    """A stream per dataset folder (its remote), cached in `local`/<folder name>."""
    return [Stream(remote=str(f), local=str(local / f.name),
                   proportion=None if proportions is None else proportions[i])
            for i, f in enumerate(folders)]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_every_method_and_shuffle_downloads_near_the_floor(egress_sources, tmp_path, case):
    method, algo, count, proportions, share, size = CASES[case]
    folders = egress_sources[:count]
    streams = _streams(folders, tmp_path, proportions)
    settings = {"batching_method": method, "shuffle_algo": algo,
                "epoch_size": None if size is None else int(EGRESS_SAMPLES * count * size)}
    limit = (2 * plan_json(tmp_path, streams, None, WORKERS, settings)["min_cache_bytes"]
             if share == "2x min" else int(raw_bytes(folders) * share))
    downloaded, read, ds = run_epoch(streams, limit, WORKERS, settings)
    plan = plan_json(tmp_path, streams, limit, WORKERS, settings)
    egress = Egress.measure(downloaded, ds.config, World(workers_per_rank=WORKERS),
                            ds.catalog.footprint(), fetch_bytes(folders), limit, plan)
    assert read == egress.planned, (case, read, egress.planned)  # the whole epoch was read
    assert egress.roomy, (case, limit, plan["min_cache_bytes"])  # so the floor bound applies
    egress.assert_bounds(case)


@pytest.mark.slow
def test_naive_egress_is_not_predicted(egress_sources, tmp_path):
    """`naive` (no fitting: the loader accepts limits from about 74% of the data) reads in
    large reads, one shard after another within each; `streaming plan` simulates reads of one
    sample at a time in plan order, which download far more, and says its figure is not a
    prediction."""
    streams = _streams(egress_sources[:1], tmp_path, None)
    settings = {"shuffle_algo": "naive"}
    limit = int(raw_bytes(egress_sources[:1]) * 0.8)
    downloaded, read, ds = run_epoch(streams, limit, WORKERS, settings)
    plan = plan_json(tmp_path, streams, limit, WORKERS, settings)
    assert read == ds.config.epoch_size
    assert plan["egress_is_prediction"] is False and "'naive'" in plan["egress_note"]
    simulated = plan["nodes"][0]["epochs"][0]["bytes_downloaded"]
    floor = int(fetch_bytes(egress_sources[:1]).sum())  # the epoch reads every shard
    print(f"naive, 80%: downloaded / floor {downloaded / floor:.2f}, simulated / downloaded "
          f"{simulated / downloaded:.1f}")
    assert floor <= downloaded < simulated / 4


RANKS = 2
RANK_CASES = {  # batching, proportions, limit (share of the raw data or "2x min"), epoch_size
    "device_per_stream, 70/30 mix, 25%": ("device_per_stream", (0.7, 0.3), 0.25, None),
    "stratified, 70/30 mix, epoch_size 50%, 2x the minimum":
        ("stratified", (0.7, 0.3), "2x min", 0.5),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(RANK_CASES))
def test_the_ranks_of_a_node_download_near_the_floor(egress_sources, tmp_path, case):
    """2 ranks (processes of their own, stepping together) of 2 DataLoader workers each read
    one epoch into one node's cache."""
    from streaming.cli.plan import load_setup

    method, proportions, share, size = RANK_CASES[case]
    local = tmp_path / "local"
    streams = _streams(egress_sources, local / "node0", proportions)
    settings = {"batching_method": method, "shuffle_algo": "py1e", "shuffle_seed": 7,
                "predownload": 64,
                "epoch_size": None if size is None else int(EGRESS_SAMPLES * 2 * size)}
    limit = (2 * plan_json(tmp_path, streams, None, WORKERS, settings,
                           ranks=RANKS)["min_cache_bytes"]
             if share == "2x min" else int(raw_bytes(egress_sources) * share))
    plan = plan_json(tmp_path, streams, limit, WORKERS, settings, ranks=RANKS)
    stats = run_ranks(tmp_path, egress_sources, proportions, limit, WORKERS, settings,
                      ranks=RANKS)[0]
    setup = load_setup(tmp_path / "run.yaml")  # the config `streaming plan` read
    config = ran_config(setup.cfg, stats)
    footprint, fetch = shard_costs(egress_sources, streams)
    egress = Egress.measure(stats["bytes_downloaded"], config, setup.world, footprint, fetch,
                            limit, plan)
    assert stats["job_samples_read"] == egress.planned  # the whole epoch was read
    assert egress.roomy, (limit, plan["min_cache_bytes"])
    egress.assert_bounds(f"{case}, {RANKS} ranks x {WORKERS} workers")
