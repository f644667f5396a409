"""The lifecycle of this process's iteration: begun with the rank's epoch counter, counted as
its owner passes units on, ended or failed on the node, and handed over from the training
process to the DataLoader workers it starts; `progress` is where it stands."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from streaming.coord.node import NodeCoordinator
from streaming.coord.plans import PlanBoard
from streaming.coord.worker_setup import settle_process
from streaming.coord.world_detect import WorkerSlot, check_unchanged, worker_slot
from streaming.dataset.epochs import EpochCounter, IterationStart
from streaming.dataset.plan_view import PlanView
from streaming.plan import World


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
    """One iteration of this worker, as `IterationRun.iteration` hands it to its owner: the
    world it runs in, where it started, and the count of units (samples, packs) passed on.

    Args:
        world: This process's world (its DataLoader worker, if one).
        start: Where the epoch counter placed this iteration.
        run: The lifecycle whose count this is.
    """

    world: World
    start: IterationStart
    run: IterationRun

    def count(self, units: int = 1) -> None:
        """`units` more were passed to the consumer (counted before it gets them)."""
        self.run.counted(units)


class IterationRun:
    """This process's iteration of one dataset, from `begin` to `end` or `fail` (picklable:
    a DataLoader worker carries a hand-over token in its copy).

    Args:
        plans: The rank's plan view (the worker's world).
        epochs: The rank's epoch counter.
        node: The node coordinator (failures, epoch checks).
        board: The node's plan board (closed when this worker fails).
        detected: Whether the world was detected (then checked unchanged on `begin`).
    """

    def __init__(self, plans: PlanView, epochs: EpochCounter, node: NodeCoordinator,
                 board: PlanBoard, *, detected: bool) -> None:
        self.plans, self.epochs, self.node, self.board = plans, epochs, node, board
        self.detected = detected
        # For torchdata's state_dict(): where it started, whether a new one was asked for
        # (iter) but not begun, whether it ran to its end.
        self._start: IterationStart | None = None
        self._pending = False
        self._ended = False
        self._count = 0
        # The token of an iteration this process handed over, for the workers it starts now
        # (they carry it in their copy and join that iteration once).
        self._handover = 0

    def check_world(self) -> None:
        """WorldDetectionError when the detected world changed since construction."""
        if self.detected:
            check_unchanged(self.plans.world)

    def note_pending(self) -> None:
        """An iteration was asked for (iter) but not begun: torchdata asks for the state
        before the first item."""
        self._pending = True

    def forget(self) -> None:
        """A state was loaded: the next iteration starts where it says, not where this one
        is (`progress` peeks at the counter until one begins)."""
        self._start, self._pending = None, False

    def begin(self, *, settle: bool = True) -> tuple[World, IterationStart]:
        """Register this worker's iteration with the epoch counter; where it starts.

        Args:
            settle: Check the world and settle a DataLoader worker (or the training process,
                reading its samples itself) first.
        """
        world = self.plans.worker_world()
        if settle:
            self.check_world()
            settle_process()
        start = self.epochs.begin_worker(world.worker, world.workers_per_rank, self._handover)
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
        the hand-over in its copy): workers started later do not join it."""
        self._handover = 0

    @property
    def count(self) -> int:
        """Units (samples, packs) the owner passed on in this process's iteration."""
        return self._count

    def counted(self, units: int) -> None:
        """`units` more were passed on (see `Iteration.count`).

        Args:
            units: how many.
        """
        self._count += units

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
        """An exception escaping the block fails the node (its other processes raise it)."""
        with self.node.failing_on_error():
            yield

    def fail(self, world: World, exc: BaseException) -> None:
        """Tell the node's other processes this worker failed with `exc`, and remove the plans
        it published (a DataLoader worker of a failed epoch may live on, or be killed, with
        them; a peer that still needs one computes it again).

        Args:
            world: This worker's world (named in the failure).
            exc: What failed it.
        """
        self.node.fail_with(exc, f"rank {world.rank} worker {world.worker}")
        self.board.close()

    def progress(self) -> Progress:
        """This process's iteration as its state reports it (see `Resumption.iteration_state`)."""
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
