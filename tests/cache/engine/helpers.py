"""Shared by the real-run egress tests (test_egress.py, test_egress_methods.py): an epoch read
under a cache_limit through a StreamingDataLoader, `streaming plan --json` for the same run,
and the node's downloads set against the floor, the Belady optimum and the prediction."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streaming import Stream, StreamingDataLoader, StreamingDataset
from streaming.cache.engine.cache_engine import shard_footprint
from streaming.cache.policy.egress_bounds import belady_egress, floor_egress
from streaming.cache.policy.minimum_limit import Footprint
from streaming.cache.shard_facts import ShardFacts
from streaming.format.index import read_index
from streaming.observe.forecast import reader_sequences
from streaming.plan import PlanConfig, World
from tests.cli.conftest import run_cli

BATCH = 16  # per-device batch of every run
FLOOR_BOUND, OPTIMUM_BOUND, PREDICTION_TOLERANCE = 1.25, 1.10, 0.05


def fetch_bytes(folders: Sequence[Path]) -> np.ndarray:
    """Bytes a download of each shard of these dataset folders moves, in global shard order."""
    return ShardFacts.from_indexes([read_index(f) for f in folders]).fetch_bytes


def raw_bytes(folders: Sequence[Path]) -> int:
    """The raw (decompressed) bytes of every shard of these dataset folders."""
    return sum(int(read_index(f).raw_bytes.sum()) for f in folders)


def shard_costs(folders: Sequence[Path], streams: Sequence[Stream]
                ) -> tuple[Footprint, np.ndarray]:
    """Cache bytes per shard of these dataset folders when read through `streams` (as the
    dataset's catalog counts them), and bytes a download of each moves."""
    facts = ShardFacts.from_indexes([read_index(f) for f in folders])
    return shard_footprint(facts, streams), facts.fetch_bytes


def run_epoch(streams: list[Stream], limit: int, workers: int,
              settings: Mapping[str, Any]) -> tuple[int, int, StreamingDataset]:
    """Read one epoch of `streams` from empty cache folders under `limit` with a
    StreamingDataLoader of `workers` workers (batch `BATCH`, shuffled, plus the dataset
    keywords in `settings`); the bytes the node downloaded, the samples read, and the dataset
    (closed)."""
    for s in streams:
        shutil.rmtree(s.local, ignore_errors=True)
    ds = StreamingDataset(streams=streams, cache_limit=limit, batch_size=BATCH, shuffle=True,
                          **settings)
    try:
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers)
        read = sum(len(batch["id"]) for batch in loader)
        return ds.cache_stats().bytes_downloaded, read, ds
    finally:
        ds.close()


def plan_json(folder: Path, streams: list[Stream], limit: int | None, workers: int,
              settings: Mapping[str, Any], ranks: int = 1) -> dict:
    """`streaming plan --json` for the run of `streams` with the dataset keywords `settings`
    (batch `BATCH`, shuffled), on one node of `ranks` ranks of `workers` DataLoader workers,
    under `limit` (None: no limit); the config file is written in `folder`."""
    lines = ["streams:"]
    for s in streams:
        weight = "" if s.proportion is None else f", proportion: {s.proportion}"
        lines.append(f"  - {{remote: '{s.remote}', local: '{s.local}'{weight}}}")
    lines += [f"batch_size: {BATCH}", "shuffle: true",
              f"topology: {{nodes: 1, ranks_per_node: {ranks}, workers_per_rank: {workers}}}"]
    lines += [f"{key}: {value}" for key, value in settings.items() if value is not None]
    if limit is not None:
        lines.append(f"cache_limit: {limit}")
    config = folder / "run.yaml"
    config.write_text("\n".join(lines) + "\n")
    ran = run_cli("plan", config, "--json")
    assert ran.code == 0, ran.err
    return ran.json()


@dataclass(frozen=True)
class Egress:
    """A node's epoch: the bytes it downloaded against the floor (each shard its epoch reads,
    fetched once), the Belady optimum for its plan and limit, and `streaming plan`'s
    prediction; `roomy` when the limit is at least twice the stated minimum."""

    downloaded: int
    floor: int
    optimum: int
    predicted: int
    roomy: bool
    planned: int  # samples the node's readers read in the plan

    @classmethod
    def measure(cls, downloaded: int, config: PlanConfig, world: World, footprint: Footprint,
                fetch: np.ndarray, limit: int, plan: dict, node: int = 0) -> Egress:
        """The yardsticks of node `node`'s epoch 0 under the fitted plan `config` read by
        `world`'s readers, with `plan` the `streaming plan --json` report of the same run.

        Args:
            downloaded: bytes the node downloaded.
            config: the plan config the run used (fitted to the limit).
            world: the job's topology.
            footprint: cache bytes per shard.
            fetch: bytes a download of each shard moves.
            limit: the cache_limit in bytes.
            plan: `streaming plan --json` for the same run and limit.
            node: the node.
        """
        readers = reader_sequences(config, world, node, 0)
        floor = floor_egress(readers, footprint, fetch).bytes
        best = belady_egress(readers, footprint, fetch, limit).bytes
        predicted = plan["nodes"][node]["epochs"][0]["bytes_downloaded"]
        return cls(downloaded, floor, best, predicted, limit >= 2 * plan["min_cache_bytes"],
                   sum(len(r) for r in readers))

    @property
    def ratios(self) -> tuple[float, float, float]:
        """Downloaded bytes over the floor's, the optimum's and the prediction's."""
        return (self.downloaded / self.floor, self.downloaded / self.optimum,
                self.downloaded / self.predicted)

    def assert_bounds(self, case: str) -> None:
        """Assert the bounds: at most `FLOOR_BOUND` x the floor when the limit is roomy, at
        most `OPTIMUM_BOUND` x the optimum, within `PREDICTION_TOLERANCE` of the prediction."""
        to_floor, to_best, to_predicted = self.ratios
        print(f"{case}: downloaded / floor {to_floor:.3f}, / Belady {to_best:.3f}, "
              f"/ predicted {to_predicted:.3f} (limit >= 2x minimum: {self.roomy})")
        if self.roomy:
            assert to_floor <= FLOOR_BOUND, (case, self)
        assert to_best <= OPTIMUM_BOUND, (case, self)
        assert abs(to_predicted - 1) <= PREDICTION_TOLERANCE, (case, self)
