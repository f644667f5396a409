"""A dataset's resume state: built from the rank's epoch counter and this process's
iteration (the reference's and Composer's form after a count of samples, torchdata's form
after what the iteration yielded) and loaded back into the counter."""

from __future__ import annotations

import dataclasses
from typing import Any

from streaming.coord.world_detect import worker_slot
from streaming.dataset.epochs import EpochCounter
from streaming.dataset.iteration_run import IterationRun, Progress
from streaming.dataset.plan_view import PlanView
from streaming.dataset.state import ResumeState, WorkerPosition
from streaming.errors import StateMismatchError


class Resumption:
    """The resume state of one dataset on this rank.

    Args:
        plans: The rank's plan view (config, world, the config a loaded state imposed).
        epochs: The rank's epoch counter, where a loaded state goes.
        run: This process's iteration (its progress).
    """

    def __init__(self, plans: PlanView, epochs: EpochCounter, run: IterationRun) -> None:
        self.plans, self.epochs, self.run = plans, epochs, run
        self.config, self.world = plans.config, plans.world
        self._fingerprints: dict[int, str] = {}  # by shuffle seed (see `fingerprint`)

    def fingerprint(self, shuffle_seed: int) -> str:
        """The config's fingerprint with `shuffle_seed`, minus what may change on resume: the
        canonical node count (adopted from the state) and the per-device batch size (elastic
        topologies change it). Remembered per seed: it hashes every shard's sample count, and
        every state a worker reports (torchdata asks after each batch) carries it.

        Args:
            shuffle_seed: The seed to fingerprint the config with.
        """
        known = self._fingerprints.get(shuffle_seed)
        if known is None:
            known = self._fingerprints[shuffle_seed] = dataclasses.replace(
                self.config, num_canonical_nodes=None, batch_size=1,
                shuffle_seed=shuffle_seed).fingerprint()
        return known

    def resume_state(self, epoch: int, sample_in_epoch: int) -> dict[str, Any]:
        """The state pointing at global sample `sample_in_epoch` of `epoch`.

        Args:
            epoch: The epoch.
            sample_in_epoch: The global sample of `epoch`.
        """
        cfg = self.plans.config_now()
        return ResumeState(
            epoch=epoch, sample_in_epoch=int(sample_in_epoch),
            num_canonical_nodes=int(cfg.canonical_nodes(self.world)),
            shuffle_seed=int(cfg.shuffle_seed), fingerprint=self.fingerprint(cfg.shuffle_seed),
            initial_physical_nodes=self.world.num_nodes).to_dict()

    def worker_position(self, progress: Progress) -> dict[str, Any]:
        """A DataLoader worker's own count, as torchdata's per-worker state carries it.

        Args:
            progress: The worker's progress (`IterationRun.progress`, inside a worker).
        """
        slot = progress.slot
        assert slot is not None
        return WorkerPosition(slot.id, slot.num_workers, progress.done, progress.ended,
                              self.world.num_nodes, self.world.ranks_per_node).to_dict()

    def state_dict(self, num_samples: int | None = None, from_beginning: bool = False
                   ) -> dict[str, Any]:
        """`state_after(num_samples)` when a count is given (the reference's form), else
        `iteration_state()` (torchdata's form).

        Args:
            num_samples: See `state_after`; None: this process's iteration's state.
            from_beginning: See `state_after`.
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
        now = self.run.progress()
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
        `strict=False`.

        Args:
            obj: A state from `state_dict`.
            strict: Refuse a state of another config or shuffle seed.
        """
        state = ResumeState.from_dict(obj)
        seed = state.shuffle_seed if state.shuffle_seed >= 0 else self.config.shuffle_seed
        if strict and seed != self.config.shuffle_seed:
            raise StateMismatchError(
                f"resumption state has shuffle_seed={seed}, this dataset has "
                f"{self.config.shuffle_seed}; pass strict=False to resume anyway")
        state.check(self.fingerprint(self.config.shuffle_seed), strict=strict)
        ncn = state.num_canonical_nodes or int(self.config.canonical_nodes(self.world))
        self.run.forget()
        if "worker" not in obj:
            self.epochs.set_resume(state.epoch, state.sample_in_epoch, ncn, seed)
            return
        mine = WorkerPosition.from_dict(obj["worker"])
        self._check_worker(mine)
        self.epochs.set_worker_resume(state.epoch, state.sample_in_epoch, ncn, seed,
                                      worker=mine.worker, num_workers=mine.num_workers,
                                      skip=mine.samples, ended=mine.ended)

    def _check_worker(self, mine: WorkerPosition) -> None:
        """StateMismatchError unless this process is the worker `mine` was taken by, on the
        same shape of job."""
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

    def restart_at(self, epoch: int) -> None:
        """Make the next iteration run `epoch` from its start (keeping a loaded state's
        canonical node count and seed).

        Args:
            epoch: The epoch.
        """
        ncn, seed = self.epochs.overrides()
        self.epochs.set_resume(int(epoch), 0, ncn, seed)
