"""A dataset's session on its node: the node coordinator it joined, this rank's epoch counter,
the plan board the node's ranks share plans through, the progress of this process's
iteration and the resumption state built from them (and loaded back into them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from streaming.coord.names import Namespace
from streaming.coord.node import NodeCoordinator
from streaming.coord.plans import PlanBoard
from streaming.coord.worker_setup import settle_worker
from streaming.coord.world_detect import WorkerSlot, check_unchanged, worker_slot
from streaming.dataset.epochs import EpochCounter, IterationStart
from streaming.dataset.state import ResumeState, WorkerPosition
from streaming.errors import StateMismatchError
from streaming.plan import PlanConfig, World, plan_node
from streaming.plan.planner import NodePlan, deal_batches

JOIN_TIMEOUT = 120.0  # seconds a local rank waits for its node's leader at start-up


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where this process's iteration is, as its state reports it: the start it registered,
    the units of its own list done (skipped on resume plus yielded) and whether it ended."""

    slot: WorkerSlot | None
    start: IterationStart
    done: int
    ended: bool


@dataclasses.dataclass
class Iteration:
    """One iteration of this worker, as `Session.iteration` hands it to its owner: the world
    it runs in, where it started, and the count of units (samples, packs) passed on.

    Args:
        world: This process's world (its DataLoader worker, if one).
        start: Where the epoch counter placed this iteration.
        session: The session whose progress the count is.
    """

    world: World
    start: IterationStart
    session: Session

    def count(self, units: int = 1) -> None:
        """`units` more were passed to the consumer (counted before it gets them)."""
        self.session._count += units


class Session:
    """Node coordination, epoch counter, plan publication and resume state of one dataset
    (picklable: DataLoader workers attach to the same shared segments by name)."""

    def __init__(self, config: PlanConfig, world: World, local_dirs: Sequence[Path | str], *,
                 detected: bool) -> None:
        self.config, self.world, self.detected = config, world, detected
        self.namespace = Namespace.for_job(list(local_dirs), salt=config.fingerprint())
        self.node = NodeCoordinator.join(self.namespace, timeout=JOIN_TIMEOUT)
        rank = world.rank_in_node
        self.epochs = EpochCounter(self.namespace.name(f"e{rank}"),
                                   self.namespace.name(f"e{rank}k"), create=True)
        self.board = PlanBoard(self.namespace)
        self._plan: tuple[tuple, NodePlan] | None = None  # the last node plan, by its key
        self._per_rank: dict[tuple, int] = {}
        self._fingerprints: dict[int, str] = {}  # by shuffle seed (see `fingerprint`)
        # This process's iteration, for torchdata's state_dict(): where it started, whether a
        # new one was asked for (iter) but not begun, whether it ran to its end.
        self._start: IterationStart | None = None
        self._pending = False
        self._ended = False
        self._count = 0
        # The token of an iteration this process handed over, for the workers it starts now
        # (they carry it in their copy of the session and join that iteration once).
        self._handover = 0

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plan": None}  # a worker plans for its own world

    # ----- planning ----------------------------------------------------------------------
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
        cache's check, the epoch's length and the first iteration)."""
        key = (cfg.num_canonical_nodes, cfg.shuffle_seed, cfg.batch_size, world, epoch, sample)
        if self._plan is None or self._plan[0] != key:
            self._plan = (key, plan_node(cfg, world, epoch, sample))
        return self._plan[1]

    def worker_sample_ids(self, epoch: int, sample_in_epoch: int,
                          world: World | None = None) -> np.ndarray:
        """A worker's planned global ids for an epoch (-1 marks padding)."""
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
        over (`hand_over`), its share of the rank's batches after the handed ones.

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

    def check_world(self) -> None:
        """WorldDetectionError when the detected world changed since construction."""
        if self.detected:
            check_unchanged(self.world)

    # ----- iteration ---------------------------------------------------------------------
    def note_pending(self) -> None:
        """An iteration was asked for (iter) but not begun: torchdata asks for the state
        before the first item."""
        self._pending = True

    def begin(self, *, settle: bool = True) -> tuple[World, IterationStart]:
        """Register this worker's iteration with the epoch counter; where it starts."""
        world = self.worker_world()
        if settle:
            self.check_world()
            settle_worker()
        start = self.epochs.begin_worker(world.worker, world.workers_per_rank,
                                         self._handover)
        self._handover = 0
        self.node.check(start.epoch)
        self._start, self._pending, self._ended, self._count = start, False, False, 0
        return world, start

    def next_start(self) -> IterationStart:
        """Where the rank's next iteration would start if the training process (no
        DataLoader worker) began it now."""
        return self.epochs.peek(0, 1)

    def hand_over(self, num_workers: int, batches: int) -> None:
        """Let the `num_workers` DataLoader workers started next (until `forget_hand_over`)
        go on with the iteration this process began, after the first `batches` batches of the
        rank's list that it read (`EpochCounter.hand_over`).

        Args:
            num_workers: the DataLoader workers.
            batches: the batches this process read.
        """
        self._handover = self.epochs.hand_over(num_workers, batches)

    def forget_hand_over(self) -> None:
        """The workers that go on with the handed-over iteration have started (each carries
        the hand-over in its copy of the session): workers started later do not join it."""
        self._handover = 0

    @property
    def count(self) -> int:
        """Units (samples, packs) the owner passed on in this process's iteration."""
        return self._count

    @contextmanager
    def iteration(self, *, settle: bool = True) -> Iterator[Iteration]:
        """One iteration of this worker around its owner's generator: begun on entry
        (`begin`), failing the node on an exception escaping the block (`fail`) and ended when
        the block completes (`end`). A generator closed before its end (GeneratorExit) leaves
        the iteration neither failed nor ended: its state is where the consumer stopped.

        Args:
            settle: Check the world and settle a DataLoader worker first (see `begin`).
        """
        world, start = self.begin(settle=settle)
        try:
            yield Iteration(world, start, self)
        except Exception as exc:
            self.fail(world, exc)
            raise
        self.end()

    def end(self) -> None:
        """This worker's iteration ran to its end."""
        self._ended = True
        if self._start is not None:
            self.epochs.finish(self._start.epoch)

    @contextmanager
    def failing_on_error(self) -> Iterator[None]:
        with self.node.failing_on_error():
            yield

    def fail(self, world: World, exc: BaseException) -> None:
        """Tell the node's other processes this worker failed with `exc`, and remove the plans
        it published (a DataLoader worker of a failed epoch may live on, or be killed, with
        them; a peer that still needs one computes it again)."""
        self.node.fail_with(exc, f"rank {world.rank} worker {world.worker}")
        self.board.close()

    def progress(self) -> Progress:
        """This process's iteration as its state reports it (see `iteration_state`)."""
        slot = worker_slot()
        worker, workers = (slot.id, slot.num_workers) if slot is not None else (0, 1)
        if self._start is None or self._pending:
            start = self.epochs.peek(worker, workers, self._handover)
            return Progress(slot, start, start.skip, start.ended)
        return Progress(slot, self._start, self._start.skip + self._count, self._ended)

    def latest_epoch(self) -> int:
        """The epoch of this rank's latest iteration (0 before the first)."""
        return self.epochs.current()[0]

    def running_or_next_epoch(self) -> int:
        """The epoch this rank iterates now or, once every worker ran it to its end, the
        epoch its next iteration runs."""
        return self.epochs.running_or_next()

    # ----- node-wide values --------------------------------------------------------------
    def shared_name(self, tag: str) -> str:
        """The name of a shared-memory segment `tag` of this dataset on its node."""
        return self.namespace.name(tag)

    def node_value(self, key: str, compute: Callable[[], int]) -> int:
        """The int `compute` returns, computed once per node under `key` (its ranks and
        DataLoader workers share it through the plan board)."""
        return int(self.board.slice(key, lambda: np.full((1, 1, 1), compute(), np.int64),
                                    0, 0)[0])

    # ----- resumption --------------------------------------------------------------------
    def fingerprint(self, shuffle_seed: int) -> str:
        """The config's fingerprint with `shuffle_seed`, minus what may change on resume: the
        canonical node count (adopted from the state) and the per-device batch size (elastic
        topologies change it). Remembered per seed: it hashes every shard's sample count, and
        every state a worker reports (torchdata asks after each batch) carries it."""
        known = self._fingerprints.get(shuffle_seed)
        if known is None:
            known = self._fingerprints[shuffle_seed] = dataclasses.replace(
                self.config, num_canonical_nodes=None, batch_size=1,
                shuffle_seed=shuffle_seed).fingerprint()
        return known

    def resume_state(self, epoch: int, sample_in_epoch: int) -> dict[str, Any]:
        """The state pointing at global sample `sample_in_epoch` of `epoch`."""
        cfg = self.config_now()
        return ResumeState(
            epoch=epoch, sample_in_epoch=int(sample_in_epoch),
            num_canonical_nodes=int(cfg.canonical_nodes(self.world)),
            shuffle_seed=int(cfg.shuffle_seed), fingerprint=self.fingerprint(cfg.shuffle_seed),
            initial_physical_nodes=self.world.num_nodes).to_dict()

    def worker_position(self, progress: Progress) -> dict[str, Any]:
        """A DataLoader worker's own count, as torchdata's per-worker state carries it."""
        slot = progress.slot
        assert slot is not None
        return WorkerPosition(slot.id, slot.num_workers, progress.done, progress.ended,
                              self.world.num_nodes, self.world.ranks_per_node).to_dict()

    def state_dict(self, num_samples: int | None = None, from_beginning: bool = False
                   ) -> dict[str, Any]:
        """The resumption state in one of two forms: after `num_samples` global samples
        (`state_after`, the reference's and Composer's form) or, without `num_samples`, after
        what this process's iteration yielded (`iteration_state`, torchdata's form).

        Args:
            num_samples: Global samples of the current epoch a loader counted, or None.
            from_beginning: Count them from the epoch's first sample, not from where its
                iteration started.
        """
        if num_samples is None:
            return self.iteration_state()
        return self.state_after(num_samples, from_beginning=from_beginning)

    def state_after(self, num_samples: int, *, from_beginning: bool = False) -> dict[str, Any]:
        """The state after `num_samples` global samples of the current epoch (counted from
        where it started, or with `from_beginning` from its first sample).

        After an epoch's last sample the state stays in that epoch (`sample_in_epoch` = its
        size, as the reference saves it): loading it ends that epoch at once, so a trainer
        that keeps its own epoch counter (Composer) sees the epoch end where it expects it.
        With no sample counted after an epoch ran to its end (Composer's `1ep` checkpoint),
        the state is the next epoch's start.

        Args:
            num_samples: Global samples of the current epoch a loader counted.
            from_beginning: Count them from the epoch's first sample.
        """
        epoch, offset = self.epochs.current()
        if num_samples == 0 and self.epochs.running_or_next() > epoch:
            return self.resume_state(epoch + 1, 0)
        return self.resume_state(epoch, num_samples if from_beginning else offset + num_samples)

    def start_point(self) -> tuple[int, int]:
        """(epoch, sample_in_epoch) of `state_dict(0)`: where the rank's latest iteration
        started, or the next epoch's start once every worker ran it to the end."""
        epoch, offset = self.epochs.current()
        if self.epochs.running_or_next() > epoch:
            return epoch + 1, 0
        return epoch, offset

    def iteration_state(self) -> dict[str, Any]:
        """The state after what this process's iteration has yielded (torchdata's protocol).

        In the training process (no DataLoader workers) that is the rank's position. Inside a
        worker it is the worker's own: the rank-wide point its iteration started from plus
        `worker` (a WorkerPosition), since torchdata saves every worker's state as of the last
        batch the trainer got from it and hands each worker back its own. A state taken after
        the last sample but before the iteration saw its end points at that end, so the
        resumed iteration ends at once, as the uninterrupted one did.
        """
        now = self.progress()
        epoch, sample = now.start.epoch, now.start.sample_in_epoch
        if now.slot is not None:
            return {**self.resume_state(epoch, sample), "worker": self.worker_position(now)}
        sample += now.done * self.world.data_parallel_ranks
        if now.ended:
            epoch, sample = epoch + 1, 0
        return self.resume_state(epoch, sample)

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Continue from `obj` at the next iteration (also mid-run and on another topology).
        StateMismatchError if `obj` came from a differently configured dataset, unless
        `strict=False`."""
        state = ResumeState.from_dict(obj)
        seed = state.shuffle_seed if state.shuffle_seed >= 0 else self.config.shuffle_seed
        if strict and seed != self.config.shuffle_seed:
            raise StateMismatchError(
                f"resumption state has shuffle_seed={seed}, this dataset has "
                f"{self.config.shuffle_seed}; pass strict=False to resume anyway")
        state.check(self.fingerprint(self.config.shuffle_seed), strict=strict)
        ncn = state.num_canonical_nodes or int(self.config.canonical_nodes(self.world))
        self._start, self._pending = None, False
        if "worker" not in obj:
            self.epochs.set_resume(state.epoch, state.sample_in_epoch, ncn, seed)
            return
        mine = WorkerPosition.from_dict(obj["worker"])
        slot = worker_slot()
        if slot is None or (slot.id, slot.num_workers) != (mine.worker, mine.num_workers):
            where = "the training process" if slot is None else \
                f"worker {slot.id} of {slot.num_workers}"
            raise StateMismatchError(
                f"this state was taken by DataLoader worker {mine.worker} of "
                f"{mine.num_workers} (torchdata's StatefulDataLoader saves one per worker) and "
                f"is being loaded in {where}: load the StatefulDataLoader's own state_dict() "
                "into a StatefulDataLoader with the same num_workers, or use "
                "StreamingDataLoader, whose state is the rank's")
        shape = (self.world.num_nodes, self.world.ranks_per_node)
        if (mine.num_nodes, mine.ranks_per_node) != shape:
            raise StateMismatchError(
                f"this per-worker state (torchdata's StatefulDataLoader) was taken on "
                f"{mine.num_nodes} node(s) of {mine.ranks_per_node} rank(s); this job has "
                f"{shape[0]} of {shape[1]}: per-worker positions resume on the same shape only "
                "(StreamingDataLoader's rank-wide state resumes on any)")
        self.epochs.set_worker_resume(state.epoch, state.sample_in_epoch, ncn, seed,
                                      worker=mine.worker, num_workers=mine.num_workers,
                                      skip=mine.samples, ended=mine.ended)

    def restart_at(self, epoch: int) -> None:
        """Make the next iteration run `epoch` from its start (keeping a loaded state's
        canonical node count and seed)."""
        ncn, seed = self.epochs.overrides()
        self.epochs.set_resume(int(epoch), 0, ncn, seed)

    def close(self) -> None:
        self.board.close()
        self.epochs.close()
        self.node.close()
