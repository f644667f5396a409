"""What a run will download, evict and hold in its caches, predicted from its config before
anything is spent: every node's plan for every epoch (the plan fitted to the cache exactly as
StreamingDataset fits it), played through the cache model of
`streaming.cache.policy.simulated_cache`. Pure: config, world, shard sizes and the limit in;
figures out.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

import numpy as np

from streaming.cache.policy.cache_limit import CacheLimit
from streaming.cache.policy.minimum_limit import (
    Footprint,
    MinimumLimit,
    check_limit,
    minimum_limit,
    reader_shards,
)
from streaming.cache.policy.plan_fit import fit_plan
from streaming.cache.policy.shuffle_fit import BLOCK_SHUFFLES, SHARD_SHUFFLES
from streaming.cache.policy.simulated_cache import SimulatedCache, SimulatedEpoch
from streaming.errors import PlanError
from streaming.plan import PlanConfig, World, plan_node


@dataclass(frozen=True)
class RunSpec:
    """A run to predict.

    Args:
        config: the plan config as the user gives it (fitted to the cache here).
        world: the topology (its position is ignored: every node is simulated).
        footprint: cache bytes per shard (`Footprint`; zero for local-only shards).
        fetch_bytes: bytes a download of each shard moves (compressed size when compressed).
        cache_limit: the limit each process of the job is given (None: no limit).
        predownload: samples each reader prepares ahead.
        epochs: epochs to run.
        other_bytes: bytes of the other files a node's cache folders hold (each cached
            stream's index.json, the cache's bookkeeping files and any sample-length files),
            which count against the limit as the engine counts them.
        lengths_bytes: bytes each node downloads once, before its first batch, to learn the
            sample lengths of a packed run (side files, or the shards a scan reads); fresh
            disks download them again.
        fit_other_bytes: the other bytes the dataset fits its shuffle to the limit with (each
            cached stream's index.json and bookkeeping, `Catalog.cache_other_bytes`); None:
            `other_bytes`.
        decoded: bytes per shard a reading process holds once it decodes it whole (Parquet
            row groups), which the dataset fits its shuffle to as well; None: none is.
        decoded_room: bytes of decoded shards each reading process keeps.
    """

    config: PlanConfig
    world: World
    footprint: Footprint
    fetch_bytes: np.ndarray
    cache_limit: CacheLimit | None
    predownload: int
    epochs: int = 1
    other_bytes: int = 0
    lengths_bytes: int = 0
    fit_other_bytes: int | None = None
    decoded: Footprint | None = None
    decoded_room: int = 0

    @property
    def limit_bytes(self) -> int | None:
        """The cache limit in bytes (None: no limit)."""
        return None if self.cache_limit is None else self.cache_limit.nbytes


@dataclass(frozen=True)
class Restart:
    """A restart on fresh local disks at global batch `step`: what each node downloads from
    there to the end of the run (sample lengths again included), against the same stretch
    without the restart."""

    step: int
    epoch: int
    bytes_after: tuple[int, ...]
    bytes_without: tuple[int, ...]
    job_nodes: int | None = None  # the job's nodes when only these were simulated

    @property
    def extra_bytes(self) -> int:
        """Egress the restart adds to the whole job (estimated from the simulated nodes' mean
        when only some were simulated)."""
        extra = sum(self.bytes_after) - sum(self.bytes_without)
        if self.job_nodes is None:
            return extra
        return _as_job(extra, len(self.bytes_after), self.job_nodes)


# Why the egress of a shuffle that cannot be fitted to the limit is not predicted when it evicts.
UNFITTED_EGRESS = (
    "not a prediction: shuffle_algo={algo!r} cannot be fitted to the cache_limit, so its "
    "readers read in large reads (streaming.read.sizing), each one shard after another in the "
    "order the read first meets them, while this simulation reads one sample at a time in plan "
    "order, where nearly every sample is another shard; with evictions its downloads are far "
    "more than a run's (without evictions each shard read is downloaded once either way)")


@dataclass(frozen=True)
class Forecast:
    """The prediction: `nodes[i][e]` is the cache of node `node_ids[i]` in epoch e (every node
    of the job, or the ones asked for); `batches_per_epoch` global batches."""

    spec: RunSpec
    config: PlanConfig
    nodes: tuple[tuple[SimulatedEpoch, ...], ...]
    batches_per_epoch: int
    node_ids: tuple[int, ...]

    @property
    def egress_unmodelled(self) -> str | None:
        """Why the egress figures do not predict the run (None: they do): a shuffle the cache
        cannot be fitted to (`naive`) whose simulated epochs evict."""
        config = self.config
        if not config.shuffle or config.shuffle_algo in BLOCK_SHUFFLES + SHARD_SHUFFLES:
            return None
        if not any(epoch.evictions for node in self.nodes for epoch in node):
            return None
        return UNFITTED_EGRESS.format(algo=config.shuffle_algo)

    def fetchers(self, epoch: int) -> np.ndarray:
        """Per shard, how many of the simulated nodes download it in `epoch`.

        Args:
            epoch: the epoch (0-based).
        """
        fetched = [node[epoch].fetched for node in self.nodes]  # each node's holds a shard once
        return np.bincount(np.concatenate([*fetched, np.zeros(0, np.int64)]),
                           minlength=len(self.spec.fetch_bytes))

    @property
    def duplicated(self) -> tuple[int, ...]:
        """Per epoch, the shards more than one simulated node downloads."""
        return tuple(int((self.fetchers(e) > 1).sum()) for e in range(self.spec.epochs))

    @property
    def sampled(self) -> bool:
        """Whether only some of the job's nodes were simulated."""
        return len(self.node_ids) < self.spec.world.num_nodes

    def egress_per_epoch(self) -> list[int]:
        """Bytes the whole job downloads in each epoch; when only some nodes were simulated,
        their mean times the job's nodes."""
        sums = [sum(node[e].bytes_downloaded for node in self.nodes)
                for e in range(self.spec.epochs)]
        if not self.sampled:
            return sums
        return [_as_job(b, len(self.nodes), self.spec.world.num_nodes) for b in sums]

    @property
    def lengths_egress(self) -> int:
        """Bytes the whole job downloads for sample lengths: every node reads every stream's,
        once."""
        return self.spec.lengths_bytes * self.spec.world.num_nodes

    @property
    def egress_bytes(self) -> int:
        """Bytes the whole job downloads: its epochs' shards and the lengths read at start."""
        return sum(self.egress_per_epoch()) + self.lengths_egress


def _as_job(total: int, simulated: int, job_nodes: int) -> int:
    """A total over `simulated` nodes as the job's estimate: their mean times its nodes."""
    return round(total * job_nodes / max(simulated, 1))


def reader_sequences(config: PlanConfig, world: World, node: int, epoch: int,
                     sample_in_epoch: int = 0, limit: int | None = None) -> list[np.ndarray]:
    """The shard sequence of each reader (rank x DataLoader worker) of `node` in `epoch`, from
    `sample_in_epoch` on; each cut to its first `limit` samples when given."""
    plan = plan_node(config, world.with_position(node), epoch, sample_in_epoch)
    ids = plan.ids.reshape(-1, plan.ids.shape[-1])
    out = []
    for row in ids:
        row = row[row >= 0][:limit]
        out.append(reader_shards(row, config.shard_offsets))
    return out


T = TypeVar("T")
# The plan the minimum is computed for: fitted to the smallest limit there is.
SMALLEST_LIMIT = CacheLimit(1, 1)


class NodeMap(Protocol):
    """Runs a node's simulation for each node and gives the results in node order (`map`, or a
    process pool's `map`)."""

    def __call__(self, fn: Callable[[int], T], nodes: Iterable[int], /) -> Iterable[T]: ...


def predict(spec: RunSpec, map_nodes: NodeMap = map,
            only: Sequence[int] | None = None) -> Forecast:
    """Simulate every node's cache over `spec.epochs` epochs.

    Args:
        spec: the run.
        map_nodes: how the nodes' simulations run: `map` here, or the `map` of a process pool
            (each node is independent; results come back in node order).
        only: simulate just these nodes (each one's figures are exact; the job's egress is
            then estimated from their mean).
    """
    if spec.epochs < 1:
        raise PlanError(f"epochs must be at least 1, got {spec.epochs}")
    node_ids = _node_ids(spec.world.num_nodes, only)
    fit_other = spec.other_bytes if spec.fit_other_bytes is None else spec.fit_other_bytes
    config = fit_plan(spec.config, spec.world, spec.footprint, spec.cache_limit,
                      fit_other, spec.decoded, spec.decoded_room).config
    nodes = tuple(map_nodes(partial(simulate_node, spec, config), node_ids))
    return Forecast(spec, config, nodes, _batches_per_epoch(config, spec.world), node_ids)


@dataclass(frozen=True)
class JobMinimum:
    """The smallest cache_limit every node of a job accepts, for the plan fitted to the
    smallest limit: the figure the dataset's start-up check computes for its own node.

    Args:
        shards: the largest node's `minimum_limit` (shard bytes, without other files).
        other_bytes: the other files of a node's cache folders.
        node: the node that sets it.
        config: the plan config it was computed for.
    """

    shards: MinimumLimit
    other_bytes: int
    node: int
    config: PlanConfig

    @property
    def bytes(self) -> int:
        """The minimum cache_limit, other files included."""
        return self.shards.plus(self.other_bytes).bytes

    @property
    def whole(self) -> int:
        """The cache_limit that holds every shard a node's epoch reads (nothing evicted)."""
        return self.shards.plus(self.other_bytes).whole

    def check(self, limit: int | None) -> None:
        """CacheLimitError, as the dataset raises it, for a `limit` under the minimum.

        Args:
            limit: the cache_limit in bytes (None: no limit, always accepted).
        """
        if limit is not None:
            check_limit(limit, self.shards, other_bytes=self.other_bytes,
                        where=f"node {self.node}'s cache folders")


def job_minimum(spec: RunSpec, map_nodes: NodeMap = map,
                only: Sequence[int] | None = None) -> JobMinimum:
    """The minimum cache_limit of the job (or of the nodes in `only`): each node's epoch-0 plan,
    fitted to the smallest limit (the smallest block the cache fitting picks, or the block the
    config sets), through `limit.minimum_limit`, plus the run's other files.

    Args:
        spec: the run (its cache_limit is not used).
        map_nodes: how the nodes' plans are computed (see `predict`).
        only: just these nodes.
    """
    with warnings.catch_warnings():  # the user's own plan warns; this one is only measured
        warnings.simplefilter("ignore")
        config = fit_plan(spec.config, spec.world, spec.footprint, SMALLEST_LIMIT,
                          decoded=spec.decoded, decoded_room=spec.decoded_room).config
        nodes = _node_ids(spec.world.num_nodes, only)
        needs = list(map_nodes(partial(node_minimum, spec, config), nodes))
    worst = max(range(len(needs)), key=lambda i: needs[i].bytes)
    top = needs[worst]
    shards = MinimumLimit(top.bytes, top.step, top.shards, max(n.whole for n in needs))
    return JobMinimum(shards, int(spec.other_bytes), nodes[worst], config)


def node_minimum(spec: RunSpec, config: PlanConfig, node: int) -> MinimumLimit:
    """Node `node`'s `minimum_limit` for its epoch-0 plan under `config` (other files apart).

    Args:
        spec: the run.
        config: the plan config (fitted).
        node: the node.
    """
    world = dataclasses.replace(spec.world, workers_per_rank=1).with_position(node)
    plan = plan_node(config, world, 0)  # one reader per rank, as the dataset checks it
    return minimum_limit(plan.ids, spec.footprint, config.shard_offsets, plan.batch_size)


def _node_ids(num_nodes: int, only: Sequence[int] | None) -> tuple[int, ...]:
    if only is None:
        return tuple(range(num_nodes))
    ids = tuple(sorted({int(n) for n in only}))
    if not ids:
        raise PlanError("no node to simulate was given")
    wrong = [n for n in ids if not 0 <= n < num_nodes]
    if wrong:
        raise PlanError(f"node(s) {', '.join(map(str, wrong))} not in this job: its nodes are "
                        f"0 to {num_nodes - 1}")
    return ids


def simulate_node(spec: RunSpec, config: PlanConfig, node: int) -> tuple[SimulatedEpoch, ...]:
    """Node `node`'s cache over every epoch of `spec`, under the fitted plan `config`.

    Args:
        spec: the run.
        config: its plan config, fitted to the cache (`fit_plan`).
        node: the node to simulate.
    """
    cache = _node_cache(spec)
    return tuple(cache.run_epoch(reader_sequences(config, spec.world, node, e))
                 for e in range(spec.epochs))


@dataclass(frozen=True)
class RestartPoint:
    """Where a restart happens: global batch `step` is batch `in_epoch` of `epoch`."""

    step: int
    epoch: int
    in_epoch: int


@dataclass(frozen=True)
class NodeRestart:
    """One node's bytes downloaded before a restart point, and from it to the end of the run on
    fresh disks."""

    before: int
    after: int


def predict_restart(forecast: Forecast, step: int, map_nodes: NodeMap = map) -> Restart:
    """The downloads of a restart on fresh disks at global batch `step` of the run.

    Args:
        forecast: the run's prediction without a restart.
        step: the global batch the run restarts at.
        map_nodes: how the nodes' simulations run (see `predict`).
    """
    spec = forecast.spec
    per_epoch = forecast.batches_per_epoch
    if not 0 <= step < per_epoch * spec.epochs:
        raise PlanError(f"restart step {step} is outside the run's {per_epoch * spec.epochs} "
                        "global batches")
    point = RestartPoint(step, *divmod(step, per_epoch))
    nodes = list(map_nodes(partial(restart_node, spec, forecast.config, point),
                           forecast.node_ids))
    without = tuple(sum(e.bytes_downloaded for e in forecast.nodes[i]) - nodes[i].before
                    for i in range(len(nodes)))
    return Restart(step, point.epoch, tuple(n.after for n in nodes), without,
                   spec.world.num_nodes if forecast.sampled else None)


def restart_node(spec: RunSpec, config: PlanConfig, point: RestartPoint, node: int
                 ) -> NodeRestart:
    """Node `node`'s downloads before `point`, and after it on fresh disks.

    Args:
        spec: the run.
        config: its plan config, fitted to the cache (`fit_plan`).
        point: where the run restarts.
        node: the node to simulate.
    """
    world = spec.world
    batch = config.device_batch()
    done = -(-point.in_epoch * batch // world.workers_per_rank)  # samples each reader has read
    cache = _node_cache(spec)
    before = sum(cache.run_epoch(reader_sequences(config, world, node, e)).bytes_downloaded
                 for e in range(point.epoch))
    if done:
        before += cache.run_epoch(reader_sequences(config, world, node, point.epoch,
                                                   limit=done)).bytes_downloaded
    cache.wipe()
    sample = point.in_epoch * batch * world.data_parallel_ranks
    resumed = [reader_sequences(config, world, node, point.epoch, sample)]
    resumed += [reader_sequences(config, world, node, e)
                for e in range(point.epoch + 1, spec.epochs)]
    after = sum(cache.run_epoch(seqs).bytes_downloaded for seqs in resumed)
    return NodeRestart(before, after + spec.lengths_bytes)  # fresh disks: lengths again


def _node_cache(spec: RunSpec) -> SimulatedCache:
    return SimulatedCache(spec.footprint, np.asarray(spec.fetch_bytes, np.int64),
                          spec.limit_bytes, max(int(spec.predownload), 1), int(spec.other_bytes))


def _batches_per_epoch(config: PlanConfig, world: World) -> int:
    per_rank = plan_node(config, world.with_position(0), 0).samples_per_rank
    return -(-int(per_rank) // config.device_batch())
