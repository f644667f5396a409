"""plan_node / plan_worker: one node's (or worker's) sample ids for an epoch.

Pure function of (config, world, epoch, resume position). Layout of a node's plan: rank r's
device batch i goes to DataLoader worker i % W (torch pulls batches from workers round-robin),
so each rank consumes its share of the global order in order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streaming.errors import PlanError
from streaming.plan.batching import get_method
from streaming.plan.config import PlanConfig
from streaming.plan.order import EpochOrder
from streaming.plan.partition import partition_scheme
from streaming.plan.world import World


@dataclass(frozen=True)
class NodePlan:
    """One node's plan: ids[rank_in_node, worker, i]; -1 fills the end of short workers (and of a
    partial last batch). Every rank has `samples_per_rank` real ids."""

    ids: np.ndarray
    batch_size: int
    samples_per_rank: int
    sample_in_epoch: int
    epoch: int
    shard_offsets: np.ndarray

    def worker_ids(self, rank_in_node: int, worker: int) -> np.ndarray:
        """The ordered ids one DataLoader worker yields (with trailing -1 padding)."""
        return self.ids[rank_in_node, worker]

    def worker_share(self, rank_in_node: int, worker: int, workers: int) -> np.ndarray:
        """What `worker_ids` of the same plan made for `workers` DataLoader workers gives, from
        a plan made for one worker per rank (the worker count only deals each rank's batches
        out round-robin); no plan is computed.

        Args:
            rank_in_node: the rank.
            worker: the DataLoader worker.
            workers: DataLoader workers per rank.
        """
        if self.ids.shape[1] != 1:
            raise PlanError(f"worker_share needs a plan of one worker per rank, not "
                            f"{self.ids.shape[1]}")
        return deal_batches(self.ids[rank_in_node, 0], self.batch_size, worker, workers)

    def shard_access_order(self) -> np.ndarray:
        """This node's shards in order of first use (all ranks advancing together)."""
        ranks, workers, n = self.ids.shape
        steps = self.ids.reshape(ranks, workers, n // self.batch_size if n else 0,
                                 self.batch_size)
        flat = steps.transpose(2, 1, 0, 3).reshape(-1)
        flat = flat[flat >= 0]
        shards = np.searchsorted(self.shard_offsets, flat, side="right") - 1
        unique, first = np.unique(shards, return_index=True)
        return unique[np.argsort(first)].astype(np.int64)


def _setup(cfg: PlanConfig, world: World, epoch: int, sample_in_epoch: int):
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
        raise PlanError(f"epoch must be a non-negative int, got {epoch!r}")
    if (isinstance(sample_in_epoch, bool) or not isinstance(sample_in_epoch, (int, np.integer))
            or sample_in_epoch < 0):
        raise PlanError(f"sample_in_epoch must be a non-negative int, got {sample_in_epoch!r}")
    if not isinstance(world, World):
        raise PlanError(f"world must be a World, got {type(world).__name__}")
    if cfg.batch_size is None and world.workers_per_rank > 1 and sample_in_epoch:
        raise PlanError(
            "resuming mid-epoch with several DataLoader workers needs batch_size (the per-device "
            "batch of the DataLoader): without it the position cannot be mapped to the workers' "
            "batches")
    num_canonical = cfg.canonical_nodes(world)
    partition_scheme(cfg.partition_algo).check(num_canonical, world.num_groups)
    order = EpochOrder(cfg, num_canonical, int(epoch))
    return order, get_method(cfg.batching_method), cfg.device_batch()


def _to_node(batches: np.ndarray, world: World) -> np.ndarray:
    """[batches, group ranks, b] -> [ranks_per_node, workers, n] (replicas share rows)."""
    nb, rd, b = batches.shape
    workers = world.workers_per_rank
    per_worker, rest = divmod(nb, workers)
    grid = np.empty((rd, workers, (per_worker + (rest > 0)) * b), dtype=np.int64)
    # Batch k * workers + w is the k-th batch of worker w: fill through a transposed view.
    view = grid.reshape(rd, workers, -1, b).transpose(2, 1, 0, 3)
    view[:per_worker] = batches[:per_worker * workers].reshape(per_worker, workers, rd, b)
    if rest:
        view[per_worker, :rest] = batches[per_worker * workers:]
        view[per_worker, rest:] = -1
    ranks = world.node * world.ranks_per_node + np.arange(world.ranks_per_node)
    local = ranks // world.replication - world.group * world.group_ranks
    if rd == world.ranks_per_node:
        return np.ascontiguousarray(grid)
    return grid[local]


def _group_batches(cfg: PlanConfig, world: World, epoch: int, sample_in_epoch: int):
    order, method, batch = _setup(cfg, world, epoch, sample_in_epoch)
    batches, start = method.group_batches(order, world, batch, int(sample_in_epoch))
    return batches, start, batch


def plan_node(cfg: PlanConfig, world: World, epoch: int, sample_in_epoch: int = 0) -> NodePlan:
    """The asking node's plan for `epoch`, resuming after `sample_in_epoch` global samples."""
    batches, start, batch = _group_batches(cfg, world, epoch, sample_in_epoch)
    return NodePlan(
        ids=_to_node(batches, world),
        batch_size=batch,
        samples_per_rank=int(np.count_nonzero(batches[:, 0] >= 0)) if len(batches) else 0,
        sample_in_epoch=int(start),
        epoch=int(epoch),
        shard_offsets=cfg.shard_offsets,
    )


def plan_worker(cfg: PlanConfig, world: World, epoch: int, sample_in_epoch: int = 0
                ) -> np.ndarray:
    """The asking worker's ordered ids (trailing -1 where it has fewer than its peers).

    Same ids as `plan_node(...).worker_ids(...)` without building the other workers' rows.
    """
    batches, _, _ = _group_batches(cfg, world, epoch, sample_in_epoch)
    local = world.data_parallel_rank - world.group * world.group_ranks
    return _dealt(batches[:, local], world.worker, world.workers_per_rank)


def deal_batches(rank_ids: np.ndarray, batch_size: int, worker: int, workers: int,
                 skip: int = 0) -> np.ndarray:
    """One DataLoader worker's share of a rank's ordered ids (its row of a plan made for one
    worker per rank): the rank's batches of `batch_size` after the first `skip`, dealt
    round-robin over `workers`, as `plan_worker` deals them (with `skip` = 0).

    Args:
        rank_ids: the rank's ids, a whole number of batches (-1 padding at the end).
        batch_size: the plan's per-device batch size.
        worker: the DataLoader worker.
        workers: DataLoader workers per rank.
        skip: leading batches of the rank's list that no worker reads.
    """
    if len(rank_ids) % batch_size:
        raise PlanError(f"a rank's ids ({len(rank_ids)}) are not whole batches of {batch_size}")
    return _dealt(rank_ids.reshape(-1, batch_size)[skip:], worker, workers)


def _dealt(batches: np.ndarray, worker: int, workers: int) -> np.ndarray:
    """One rank's [batches, b] dealt round-robin: worker `worker`'s batches in order, then -1
    up to the longest worker's length."""
    mine = batches[worker::workers].reshape(-1)
    out = np.full(-(-len(batches) // workers) * batches.shape[1], -1, dtype=np.int64)
    out[:len(mine)] = mine
    return out


def global_order(
    cfg: PlanConfig,
    epoch: int,
    world: World | None = None,
    sample_in_epoch: int = 0,
    with_padding: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The whole epoch's global sequence from `sample_in_epoch` (for tests and inspection).

    Global batch g is entries [g*B, (g+1)*B) (the last may be partial). With `with_padding`,
    also a mask of the entries that repeat a sample only to give several ranks equal counts.
    """
    world = World() if world is None else world
    order, method, batch = _setup(cfg, world, epoch, sample_in_epoch)
    ids, pad, _ = method.global_sequence(order, world, batch, int(sample_in_epoch))
    return (ids, pad) if with_padding else ids
