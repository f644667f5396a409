"""What a dataset's plan gives each process: the config (with what a loaded state imposed),
the worlds a rank and its DataLoader workers read in, the node's plan (kept for the next ask)
and each worker's planned ids, shared with the node's other ranks through the plan board."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from streaming.coord.plans import PlanBoard
from streaming.coord.world_detect import worker_slot
from streaming.dataset.epochs import EpochCounter, IterationStart
from streaming.plan import PlanConfig, World, plan_node
from streaming.plan.planner import NodePlan, deal_batches


class PlanView:
    """One rank's view of its dataset's plan (picklable: a DataLoader worker plans for its
    own world, sharing the node's plans through the board).

    Args:
        config: The dataset's plan config.
        world: The rank's world.
        epochs: The rank's epoch counter (a loaded state's canonical node count and seed).
        board: The node's plan board.
    """

    def __init__(self, config: PlanConfig, world: World, epochs: EpochCounter,
                 board: PlanBoard) -> None:
        self.config, self.world, self.epochs, self.board = config, world, epochs, board
        self._plan: tuple[tuple, NodePlan] | None = None  # the last node plan, by its key
        self._per_rank: dict[tuple, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plan": None}  # a worker plans for its own world

    def config_now(self) -> PlanConfig:
        """The plan config with the canonical node count / seed a loaded state imposed."""
        ncn, seed = self.epochs.overrides()
        if ncn <= 0 or (ncn, seed) == (self.config.num_canonical_nodes, self.config.shuffle_seed):
            return self.config
        return dataclasses.replace(self.config, num_canonical_nodes=ncn, shuffle_seed=seed)

    def worker_world(self) -> World:
        """This process's world: the rank's, with the DataLoader worker it is (if one)."""
        info = worker_slot()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        base = self.world
        return World(base.num_nodes, base.ranks_per_node, workers, base.node,
                     base.rank_in_node, worker, base.replication)

    def rank_world(self) -> World:
        """The rank's world as one DataLoader worker reading all of it would see it."""
        base = self.world
        return World(base.num_nodes, base.ranks_per_node, 1, base.node, base.rank_in_node, 0,
                     base.replication)

    def node_plan(self, cfg: PlanConfig, world: World, epoch: int, sample: int) -> NodePlan:
        """The node's plan, kept for the next ask of the same one (start-up asks thrice: the
        cache's check, the epoch's length and the first iteration).

        Args:
            cfg: The plan config.
            world: The world to plan for.
            epoch: The epoch.
            sample: The global sample of `epoch` to start at.
        """
        key = (cfg.num_canonical_nodes, cfg.shuffle_seed, cfg.batch_size, world, epoch, sample)
        if self._plan is None or self._plan[0] != key:
            self._plan = (key, plan_node(cfg, world, epoch, sample))
        return self._plan[1]

    def worker_sample_ids(self, epoch: int, sample_in_epoch: int,
                          world: World | None = None) -> np.ndarray:
        """A worker's planned global ids for an epoch (-1 marks padding).

        Args:
            epoch: The epoch.
            sample_in_epoch: The global sample of `epoch` to start at.
            world: The worker's world (None: this process's).
        """
        world = world or self.worker_world()
        cfg = self.config_now()
        if world.ranks_per_node == 1 and world.workers_per_rank == 1:
            return self.node_plan(cfg, world, epoch, sample_in_epoch).worker_ids(0, 0)
        dealt = self._deal_inherited(cfg, world, epoch, sample_in_epoch)
        if dealt is not None:
            return dealt
        key = (f"{cfg.fingerprint()}|{cfg.num_canonical_nodes}|{cfg.shuffle_seed}|{epoch}|"
               f"{sample_in_epoch}|{world.num_nodes}|{world.ranks_per_node}|"
               f"{world.workers_per_rank}|{world.node}")
        return self.board.slice(key, lambda: self.node_plan(cfg, world, epoch, sample_in_epoch).ids,
                                world.rank_in_node, world.worker)

    def iteration_ids(self, start: IterationStart, world: World) -> np.ndarray:
        """The planned ids of `world`'s worker for an iteration placed at `start` (-1 marks
        padding): after its own resume skip, or, in an iteration the training process handed
        over (`IterationRun.hand_over`), its share of the rank's batches after the handed ones.

        Args:
            start: where the epoch counter placed the iteration.
            world: the reading worker's world.
        """
        if not start.handed:
            ids = self.worker_sample_ids(start.epoch, start.sample_in_epoch, world)
            return ids[start.skip:]
        rank = self.worker_sample_ids(start.epoch, start.sample_in_epoch, self.rank_world())
        return deal_batches(rank, self.config_now().device_batch(), world.worker,
                            world.workers_per_rank, start.handed)

    def _deal_inherited(self, cfg: PlanConfig, world: World, epoch: int,
                        sample_in_epoch: int) -> np.ndarray | None:
        """A worker's ids dealt from the rank's one-worker plan this process inherited (a
        DataLoader worker forked after the training process planned, for the dataset's length,
        the epoch it starts), or None when there is none for this epoch."""
        if self._plan is None or world.workers_per_rank == 1:
            return None
        if sample_in_epoch and cfg.batch_size is None:
            return None  # plan_node explains why this cannot be planned
        rank = World(world.num_nodes, world.ranks_per_node, 1, world.node, world.rank_in_node, 0,
                     world.replication)
        key = (cfg.num_canonical_nodes, cfg.shuffle_seed, cfg.batch_size, rank, epoch,
               sample_in_epoch)
        if self._plan[0] != key:
            return None
        return self._plan[1].worker_share(world.rank_in_node, world.worker, world.workers_per_rank)

    def samples_per_rank(self) -> int:
        """Samples each rank yields per epoch under the current config. With several ranks on
        the node, the rank counts its own row of the plan the node's first asker published."""
        cfg = self.config_now()
        key = (cfg.num_canonical_nodes, cfg.shuffle_seed)
        if key not in self._per_rank:
            if self.world.ranks_per_node > 1:
                ids = self.worker_sample_ids(0, 0, self.rank_world())
                self._per_rank[key] = int(np.count_nonzero(ids >= 0))
            else:
                plan = self.node_plan(cfg, self.world, 0, 0)
                self._per_rank[key] = int(plan.samples_per_rank)
        return self._per_rank[key]

    def node_value(self, key: str, compute: Callable[[], int]) -> int:
        """The int `compute` returns, computed once per node under `key` (its ranks and
        DataLoader workers share it through the plan board).

        Args:
            key: The value's name on the board.
            compute: Computes it (called by one process of the node).
        """
        return int(self.board.slice(key, lambda: np.full((1, 1, 1), compute(), np.int64),
                                    0, 0)[0])
