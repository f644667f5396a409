"""Bytes a real epoch downloads under a cache_limit, against the floor (each shard the node's
epoch reads, fetched once) and the Belady optimum for the plan the node knows: one process with
2 DataLoader workers, batch 16, py1e, zstd shards, a local-folder remote, as issue #49 measured
(subsampled epochs and proportion mixes downloaded 7-9x the floor before); and what `streaming
plan --cache-limit --json` predicts for the same config, against what the epoch downloaded.
The other batching methods and shuffle algorithms, and ranks of their own, are in
test_egress_methods.py."""

from __future__ import annotations

import pytest

from streaming import Stream
from streaming.plan import World
from tests.cache.engine.conftest import EGRESS_SAMPLES
from tests.cache.engine.helpers import (
    FLOOR_BOUND,
    Egress,
    fetch_bytes,
    plan_json,
    raw_bytes,
    run_epoch,
)

WORKERS = 2

CASES = {  # streams, proportions, limit (a share of the raw data, or twice the minimum), epoch
    "full epoch, 25%": (1, None, 0.25, None),
    "epoch_size 30% of the samples, 25%": (1, None, 0.25, 0.3),
    "70/30 mix, epoch_size 50%, 25%": (2, (0.7, 0.3), 0.25, 0.5),
    "two streams, full epoch, 60%": (2, None, 0.6, None),
    "epoch_size 2x the samples, 25%": (1, None, 0.25, 2.0),
    # reads sized to the stored shard pinned ~3x the shards a step holds: 2.1-2.5x the floor
    "epoch_size 30% of the samples, 2x the minimum": (1, None, "2x min", 0.3),
    "70/30 mix, epoch_size 50%, 2x the minimum": (2, (0.7, 0.3), "2x min", 0.5),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_an_epoch_under_a_limit_downloads_near_the_floor(egress_sources, tmp_path, case):
    count, proportions, share, size = CASES[case]
    folders = egress_sources[:count]
    streams = [Stream(remote=str(f), local=str(tmp_path / f.name),
                      proportion=None if proportions is None else proportions[i])
               for i, f in enumerate(folders)]
    settings = {"epoch_size": None if size is None else int(EGRESS_SAMPLES * count * size)}
    limit = (2 * plan_json(tmp_path, streams, None, WORKERS, settings)["min_cache_bytes"]
             if share == "2x min" else int(raw_bytes(folders) * share))
    downloaded, read, ds = run_epoch(streams, limit, WORKERS, settings)
    assert read >= ds.config.epoch_size
    plan = plan_json(tmp_path, streams, limit, WORKERS, settings)
    egress = Egress.measure(downloaded, ds.config, World(workers_per_rank=WORKERS),
                            ds.catalog.footprint(), fetch_bytes(folders), limit, plan)
    assert egress.floor <= min(egress.optimum, egress.downloaded)
    assert downloaded <= FLOOR_BOUND * egress.floor, (case, egress)  # at every limit here
    egress.assert_bounds(case)
