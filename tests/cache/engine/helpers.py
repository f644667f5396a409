"""Shared by the real-run egress tests (test_egress.py, test_egress_methods.py): an epoch read
under a cache_limit through a StreamingDataLoader, `streaming plan --json` for the same run,
and the node's downloads set against the floor, the Belady optimum and the prediction."""

from __future__ import annotations

import dataclasses
import json
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
from tests.support import cost_rank
from tests.support.jobs import ForkedJob

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
              settings: Mapping[str, Any], ranks: int = 1, nodes: int = 1,
              epochs: int = 1) -> dict:
    """`streaming plan --json` for `epochs` epochs of `streams` with the dataset keywords
    `settings` (batch `BATCH`, shuffled), on `nodes` nodes of `ranks` ranks of `workers`
    DataLoader workers, under `limit` (None: no limit); the config file is written in
    `folder`."""
    lines = ["streams:"]
    for s in streams:
        weight = "" if s.proportion is None else f", proportion: {s.proportion}"
        lines.append(f"  - {{remote: '{s.remote}', local: '{s.local}'{weight}}}")
    lines += [f"batch_size: {BATCH}", "shuffle: true",
              f"topology: {{nodes: {nodes}, ranks_per_node: {ranks}, workers_per_rank: {workers}}}"]
    lines += [f"{key}: {value}" for key, value in settings.items() if value is not None]
    if limit is not None:
        lines.append(f"cache_limit: {limit}")
    config = folder / "run.yaml"
    config.write_text("\n".join(lines) + "\n")
    ran = run_cli("plan", config, "--json", "--epochs", str(epochs))
    assert ran.code == 0, ran.err
    return ran.json()


def run_ranks(folder: Path, remotes: Sequence[Path], proportions: Sequence[float] | None,
              limit: int, workers: int, settings: Mapping[str, Any], *, nodes: int = 1,
              ranks: int = 2, epochs: int = 1, timeout: float = 150) -> list[dict]:
    """Run a job of `nodes` x `ranks` rank processes (tests/support/cost_rank.py, ranks
    stepping together) of `workers` DataLoader workers each, reading `epochs` epochs of the
    `remotes` streams (`proportions`, or None) under `limit` with the dataset keywords
    `settings` (batch `BATCH`); node n caches in `folder`/local/node<n>. Each node's report
    (cost_rank's JSON: cache stats, the fitted plan settings, each epoch's end)."""
    options = [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()
               if value is not None]
    shares = [] if proportions is None else ["--proportion", *map(str, proportions)]
    job = ForkedJob(folder, [], nodes=nodes, ranks_per_node=ranks,
                    script=Path(cost_rank.__file__), tag="egress", extra=[
                        "--remote", *map(str, remotes), *shares,
                        "--local-root", str(folder / "local"), "--out-dir", str(folder),
                        "--cache-limit", str(limit), "--epochs", str(epochs),
                        "--batch-size", str(BATCH), "--workers", str(workers), *options])
    for rank in job.wait(timeout=timeout):
        assert rank.returncode == 0, f"rank {rank.rank}:\n{rank.stderr[-3000:]}"
    return [json.loads((folder / f"node{n}.json").read_text()) for n in range(nodes)]


def ran_config(config: PlanConfig, report: dict) -> PlanConfig:
    """The plan a rank job ran: `config` (as `streaming plan` read it) with the settings the
    dataset fitted to the limit, which cost_rank reported in `report`."""
    fitted = {k: report["plan"][k] for k in ("shuffle_block_size", "num_canonical_nodes")}
    ran = dataclasses.replace(config, **fitted)
    assert ran.fingerprint() == report["plan"]["fingerprint"]
    return ran


def _ratio(part: int, whole: int) -> float:
    """`part / whole`, 1 for 0 / 0."""
    if whole == 0:
        return 1.0 if part == 0 else float("inf")
    return part / whole


@dataclass(frozen=True)
class Egress:
    """A node's epoch: the bytes it downloaded against the floor (each shard its epoch reads,
    fetched once), the Belady optimum for its plan and limit from the shards its cache held when
    the epoch began, and `streaming plan`'s prediction; `roomy` when the limit is at least twice
    the stated minimum. `unheld` is the floor less the shards held at the start: a later epoch
    reaches it only when the limit keeps every held shard it reads until it reads it, which the
    optimum shows it need not (so it is reported, not bounded)."""

    downloaded: int
    floor: int
    optimum: int
    predicted: int
    roomy: bool
    planned: int  # samples the node's readers read in the plan
    unheld: int

    @classmethod
    def measure(cls, downloaded: int, config: PlanConfig, world: World, footprint: Footprint,
                fetch: np.ndarray, limit: int, plan: dict, node: int = 0, epoch: int = 0,
                held: np.ndarray | None = None) -> Egress:
        """The yardsticks of node `node`'s epoch `epoch` under the fitted plan `config` read by
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
            epoch: the epoch.
            held: the shards the node's cache held when the epoch began (None: none).
        """
        assert plan["egress_is_prediction"], plan.get("egress_note")  # a shuffle fitted
        readers = reader_sequences(config, world, node, epoch)
        floor = floor_egress(readers, footprint, fetch).bytes
        best = belady_egress(readers, footprint, fetch, limit, held=held).bytes
        predicted = plan["nodes"][node]["epochs"][epoch]["bytes_downloaded"]
        return cls(downloaded, floor, best, predicted, limit >= 2 * plan["min_cache_bytes"],
                   sum(len(r) for r in readers),
                   floor_egress(readers, footprint, fetch, held).bytes)

    @property
    def ratios(self) -> tuple[float, float, float]:
        """Downloaded bytes over the floor's, the optimum's and the prediction's."""
        return (_ratio(self.downloaded, self.floor), _ratio(self.downloaded, self.optimum),
                _ratio(self.downloaded, self.predicted))

    def assert_bounds(self, case: str) -> None:
        """Assert the bounds: at most `FLOOR_BOUND` x the floor when the limit is roomy, at
        most `OPTIMUM_BOUND` x the optimum, within `PREDICTION_TOLERANCE` of the prediction."""
        to_floor, to_best, to_predicted = self.ratios
        held = ("" if self.unheld == self.floor else "; / floor less the shards held at "
                f"the start {_ratio(self.downloaded, self.unheld):.3f}")
        print(f"{case}: downloaded / floor {to_floor:.3f}, / Belady {to_best:.3f}, "
              f"/ predicted {to_predicted:.3f} (limit >= 2x minimum: {self.roomy}{held})")
        if self.roomy:
            assert to_floor <= FLOOR_BOUND, (case, self)
        assert to_best <= OPTIMUM_BOUND, (case, self)
        assert abs(to_predicted - 1) <= PREDICTION_TOLERANCE, (case, self)
