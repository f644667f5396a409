"""Streaming packing: a StreamingDataset whose iteration yields batches of packs formed on the
fly by a streaming packer (bounded buffer) over each rank's planned sample order.

Resumption is deterministic replay: a rank's packs are a pure function of its planned id order
and the lengths (known without reading data), so every DataLoader worker replays the packer
over lengths, skips the packs already consumed, and serves batches t = worker, worker + W, ...
in the canonical order. The DataLoader's round-robin then yields exactly that order for any
number of workers, and the state is one number: packs consumed in the epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.dataset import StreamingDataset
from streaming.errors import PlanError, StateMismatchError
from streaming.packing.lengths import load_lengths
from streaming.packing.planner import pack_lengths
from streaming.packing.precomputed import EpochPacks, grow
from streaming.packing.registry import make_packer
from streaming.plan import World, plan_node
from streaming.read.iterate import iter_chunks
from streaming.state import ResumeState, WorkerPosition
from streaming.world_detect import worker_slot


def rank_epoch_packs(ids: np.ndarray, lengths: np.ndarray, packing_length: int,
                     strategy: str, *, target: int | None = None, **options: Any) -> EpochPacks:
    """The packs a streaming packer emits over planned `ids` (padding -1 skipped), in order;
    with `target`, packs are split (or empty ones added) until there are that many."""
    ids = ids[ids >= 0]
    packs = [ids[p] for p in pack_lengths(lengths[ids], packing_length, strategy, **options)]
    return EpochPacks.from_packs(packs if target is None else grow(packs, target))


def worker_packs(plan: EpochPacks, skip: int, per_batch: int, worker: int,
                 workers: int) -> EpochPacks:
    """Packs of the batches t = worker, worker + workers, ... after the first `skip` packs."""
    numbers = np.arange(skip, plan.num_packs)
    batch = (numbers - skip) // per_batch
    return plan.select(numbers[batch % workers == worker])


class PackedStreamingDataset(StreamingDataset):
    """StreamingDataset yielding collated batches of `packs_per_batch` packs of `packing_column`.

    Use it with `StreamingDataLoader(ds, batch_size=None, num_workers=...)`: the loader then
    counts packs, and `state_dict()` / `load_state_dict()` resume exactly (no pack lost or
    repeated). Each batch also holds `sample_ids` (every sample of its packs, in order). All
    StreamingDataset arguments apply (streams, shuffling, batching_method, mix_unit, ...).
    """

    def __init__(
        self,
        *,
        packing_length: int = 32000,
        packing_strategy: str = "best_fit",
        filter_overlong: bool = True,
        overlong: str = "split",
        packing_column: str = "tokens",
        packing_buffer_size: int | None = None,
        packs_per_batch: int = 1,
        equal_packs: bool = True,
        collator: Any = None,
        packing: bool = True,
        **kwargs: Any,
    ) -> None:
        from streaming.packing.collate import PackCollator

        if not packing:
            raise ValueError("PackedStreamingDataset always packs; use StreamingDataset for "
                             "unpacked samples")

        if isinstance(packs_per_batch, bool) or not isinstance(packs_per_batch, int) \
                or packs_per_batch < 1:
            raise PlanError(f"packs_per_batch must be a positive int, got {packs_per_batch!r}")
        make_packer(packing_strategy, packing_length, filter_overlong=filter_overlong,
                    overlong=overlong, buffer_size=packing_buffer_size)  # validate early
        kwargs.setdefault("lengths_column", packing_column)
        super().__init__(**kwargs)
        self.packing_length = int(packing_length)
        self.packing_column = packing_column
        self.packs_per_batch = packs_per_batch
        self.equal_packs = equal_packs
        self.packing = {"strategy": packing_strategy, "filter_overlong": filter_overlong,
                        "overlong": overlong, "buffer_size": packing_buffer_size}
        self._split = not filter_overlong and overlong == "split"
        self.collator = collator or PackCollator(self.packing_length)
        self.lengths = load_lengths(self, packing_column)
        self._resume_name = self._namespace.name(f"k{self.world.rank_in_node}")
        self._resume_seg: SharedArray | None = SharedArray.create(self._resume_name, (2,),
                                                                  np.int64)
        self._cached: tuple[Any, EpochPacks] | None = None
        self._packs_yielded = 0

    # ----- planning ----------------------------------------------------------------------
    def rank_packs(self, epoch: int, world: World | None = None) -> EpochPacks:
        """This rank's packs for `epoch`, in canonical order (the same for any worker count)."""
        base = world or self.world
        rank_world = World(base.num_nodes, base.ranks_per_node, 1, base.node,
                           base.rank_in_node, 0, base.replication)
        key = (epoch, self._config_now().num_canonical_nodes, self._config_now().shuffle_seed)
        if self._cached is None or self._cached[0] != key:
            ids = self.worker_sample_ids(epoch, 0, rank_world)
            target = self._most_packs(epoch, rank_world) if self.equal_packs else None
            plan = rank_epoch_packs(ids, self.lengths, self.packing_length, target=target,
                                    **self.packing)
            self._cached = (key, plan)
        return self._cached[1]

    def _most_packs(self, epoch: int, rank_world: World) -> int | None:
        """The largest pack count of any rank in `epoch` (replays every rank's packer)."""
        if rank_world.data_parallel_ranks == 1:
            return None
        cfg, most = self._config_now(), 0
        for node in range(rank_world.num_nodes):
            plan = plan_node(cfg, rank_world.with_position(node), epoch, 0)
            for rank in range(rank_world.ranks_per_node):
                ids = plan.worker_ids(rank, 0)
                ids = ids[ids >= 0]
                packs = pack_lengths(self.lengths[ids], self.packing_length, **self.packing)
                most = max(most, len(packs))
        return most

    def __len__(self) -> int:
        """Batches of packs this rank yields in the current epoch (equal on every rank with
        `equal_packs`)."""
        epoch, _ = self._epochs.current()
        return -(-self.rank_packs(epoch).num_packs // self.packs_per_batch)

    def pack_count(self, epoch: int = 0) -> int:
        """Packs this rank yields in `epoch`."""
        return self.rank_packs(epoch).num_packs

    # ----- iteration ---------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        self._pending = True  # noted now: torchdata asks for the state before the first batch
        return self._packs_of_iteration()

    def _packs_of_iteration(self) -> Iterator[dict[str, Any]]:
        world = self._worker_world()
        start = self._epochs.begin_worker(world.worker, world.workers_per_rank)
        self._node.check(start.epoch)
        self._start, self._pending, self._ended = start, False, False
        self._packs_yielded = 0
        try:
            with self._node.failing_on_error():
                plan = self.rank_packs(start.epoch, world)
                mine = worker_packs(plan, self._resume_skip(start.epoch), self.packs_per_batch,
                                    world.worker, world.workers_per_rank)
                mine = mine.select(np.arange(min(start.skip, mine.num_packs), mine.num_packs))
            yield from self._batches(mine)
        except Exception as exc:
            self._node.fail_with(exc, f"rank {world.rank} worker {world.worker}")
            raise
        self._ended = True

    def _batches(self, plan: EpochPacks) -> Iterator[dict[str, Any]]:
        import torch

        samples = self._samples(plan.ids)
        cap, per_batch = self.packing_length, self.packs_per_batch
        for lo in range(0, plan.num_packs, per_batch):
            hi = min(lo + per_batch, plan.num_packs)
            packs, ids = [], []
            for k in range(lo, hi):
                pack_ids, pieces = plan.pack(k)
                sequences = []
                for sample_id, piece in zip(pack_ids.tolist(), pieces.tolist()):
                    tokens = self._tokens(sample_id, next(samples))
                    if self._split and tokens.size > cap:
                        tokens = tokens[piece * cap:(piece + 1) * cap]
                    sequences.append(tokens)
                packs.append(sequences)
                ids.append(pack_ids)
            batch = self.collator.batch(packs)
            batch["sample_ids"] = torch.from_numpy(np.concatenate(ids))
            self._packs_yielded += hi - lo
            yield batch

    def _samples(self, ids: np.ndarray) -> Iterator[dict[str, Any]]:
        item = self.__getitem__ if self._overridden() else None
        for chunk in iter_chunks(ids, self.spanner.locate, self._reader, self.source, item,
                                 open_file=self._open_file):
            yield from chunk

    def _tokens(self, sample_id: int, sample: dict[str, Any]) -> np.ndarray:
        if self.packing_column not in sample:
            raise PlanError(f"sample {sample_id} has no column {self.packing_column!r} to pack")
        return np.asarray(sample[self.packing_column]).reshape(-1)

    # ----- resumption --------------------------------------------------------------------
    def _resume_array(self) -> np.ndarray:
        if self._resume_seg is None:
            try:
                self._resume_seg = SharedArray.attach(self._resume_name, (2,), np.int64,
                                                      writable=True)
            except SegmentMissingError:
                raise StateMismatchError("the packing resume point is gone (its owner exited)"
                                         ) from None
        return self._resume_seg.array

    def _resume_skip(self, epoch: int) -> int:
        """Packs of `epoch` this rank consumed before the loaded state (0 when none)."""
        mark = self._resume_array()
        return int(mark[1]) if int(mark[0]) == epoch + 1 else 0

    def state_dict(self, num_samples: int | None = None, from_beginning: bool = False
                   ) -> dict[str, Any]:
        """Resumption state after `num_samples` global packs of the current epoch (the
        StreamingDataLoader passes packs: its batches' leading size is packs per batch)."""
        dp = self.world.data_parallel_ranks
        if num_samples is None:
            return self._packed_iteration_state()
        epoch, _ = self._epochs.current()
        packs = num_samples // dp + (0 if from_beginning else self._resume_skip(epoch))
        if packs >= self.rank_packs(epoch).num_packs:
            epoch, packs = epoch + 1, 0
        return self._packed_state(epoch, packs)

    def _packed_state(self, epoch: int, packs: int) -> dict[str, Any]:
        cfg = self._config_now()
        state = ResumeState(
            epoch=epoch, sample_in_epoch=0,
            num_canonical_nodes=int(cfg.canonical_nodes(self.world)),
            shuffle_seed=int(cfg.shuffle_seed), fingerprint=self._fingerprint(cfg),
            initial_physical_nodes=self.world.num_nodes).to_dict()
        dp = self.world.data_parallel_ranks
        return {**state, "packs_in_epoch": packs * dp, "packing": self._packing_identity()}

    def _packed_iteration_state(self) -> dict[str, Any]:
        """torchdata's state_dict(): the rank's packs in the training process; inside a
        DataLoader worker the packs before the iteration's start plus a `worker` entry with
        this worker's own count (see StreamingDataset._iteration_state)."""
        slot = worker_slot()
        worker, workers = (slot.id, slot.num_workers) if slot is not None else (0, 1)
        if self._start is None or self._pending:
            start = self._epochs.peek(worker, workers)
            done, ended = start.skip, start.ended
        else:
            start, done, ended = self._start, self._start.skip + self._packs_yielded, self._ended
        epoch, packs = start.epoch, self._resume_skip(start.epoch)
        if slot is not None:
            position = WorkerPosition(worker, workers, done, ended, self.world.num_nodes,
                                      self.world.ranks_per_node)
            return {**self._packed_state(epoch, packs), "worker": position.to_dict()}
        if ended:
            return self._packed_state(epoch + 1, 0)
        return self._packed_state(epoch, packs + done)

    def _packing_identity(self) -> dict[str, Any]:
        return {**self.packing, "packing_length": self.packing_length,
                "column": self.packing_column, "packs_per_batch": self.packs_per_batch,
                "data_parallel_ranks": self.world.data_parallel_ranks}

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Continue from `obj` at the next iteration. A state from another packing setup or
        data-parallel world size raises StateMismatchError; with strict=False the interrupted
        epoch restarts from its beginning instead (nothing lost, some packs repeated)."""
        if "packs_in_epoch" not in obj:
            raise StateMismatchError("not a packing state (no 'packs_in_epoch'): it was saved "
                                     "by a dataset without packing")
        same = obj.get("packing") == self._packing_identity()
        if not same and strict:
            raise StateMismatchError(
                f"packing state was saved with {obj.get('packing')!r}, this dataset has "
                f"{self._packing_identity()!r}; pass strict=False to restart the epoch")
        super().load_state_dict({**obj, "sample_in_epoch": 0}, strict=strict)
        packs = int(obj["packs_in_epoch"]) // self.world.data_parallel_ranks if same else 0
        self._resume_array()[:] = (int(obj["epoch"]) + 1, packs)

    # ----- lifecycle ---------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_resume_seg"] = None
        return state

    def close(self) -> None:
        if self._resume_seg is not None:
            self._resume_seg.close()
            self._resume_seg = None
        super().close()
