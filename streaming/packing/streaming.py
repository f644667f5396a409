"""Streaming packing: a dataset whose iteration yields batches of packs formed on the fly by a
streaming packer (bounded buffer) over each rank's planned sample order of a StreamingDataset.

Resumption is deterministic replay: a rank's packs are a pure function of its planned id order
and the lengths (known without reading data), so every DataLoader worker replays the packer
over lengths, skips the packs already consumed, and serves batches t = worker, worker + W, ...
in the canonical order. The DataLoader's round-robin then yields exactly that order for any
number of workers, and the state is the source's plus one number: packs consumed in the epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import xxhash
from torch.utils.data import IterableDataset

from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.errors import ArgumentError, PlanError, StateMismatchError
from streaming.observe.metrics import cache_metrics, disk_metrics
from streaming.packing.equal import job_most_packs
from streaming.packing.kept_columns import KeptValues, check_keep_columns
from streaming.packing.pack_planner import EpochPacks, grow, pack_lengths
from streaming.packing.pack_session import PackSession
from streaming.packing.pack_stats import PackCounts, PackFill, fill_of
from streaming.packing.strategies import make_packer
from streaming.packing.watch import PackWatch
from streaming.plan import World

if TYPE_CHECKING:
    from streaming.dataset.iteration_run import Iteration
    from streaming.packing.collate import PackCollator


class PackSource(Protocol):
    """What packing needs of a dataset (StreamingDataset offers it)."""

    world: World
    session: PackSession

    def rank_sample_ids(self, epoch: int) -> np.ndarray: ...

    def read_samples(self, ids: np.ndarray, epoch: int = 0) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


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


class PackedStreamingDataset(IterableDataset):
    """Collated batches of `packs_per_batch` packs of `packing_column` over a `source`: the
    StreamingDataset it builds from the dataset arguments it is given (`remote`, `local`,
    `shuffle`, ...: `PackedStreamingDataset(remote=..., packing_length=...)`), or one passed
    as `source` (any object with the same surface, `PackSource`).

    Use it with `StreamingDataLoader(ds, batch_size=None, num_workers=...)`: the loader then
    counts packs, and `state_dict()` / `load_state_dict()` resume exactly (no pack lost or
    repeated). Each batch also holds `sample_ids` (every sample of its packs, in order). The
    source's public attributes read through (`ds.streams`, `ds.cache_stats()`, ...).
    docs/packing.md says more about each argument.

    Args:
        packing_length: Tokens per pack (the capacity; default 32000).
        packing_strategy: "best_fit" (default), "first_fit" or "window_XX" (e.g.
            "window_100").
        filter_overlong: Drop samples longer than `packing_length`.
        overlong: Without filtering: "split" cuts a long sample into `packing_length` pieces,
            "alone" makes it a pack of its own.
        packing_column: The token column whose lengths are packed (also the dataset's
            `lengths_column`).
        packing_buffer_size: best_fit's lookahead in samples; None: 1000.
        packs_per_batch: Packs collated into each batch (a positive int).
        equal_packs: Every rank ends the epoch with the same number of packs (splitting
            packs or adding empty ones), so no rank waits for another.
        collator: Turns packs into tensors; None: `PackCollator(packing_length)`.
        packing: Must be True (accepted so that one config serves both classes).
        source: The StreamingDataset (or `PackSource`) to pack; None: a StreamingDataset
            built from `**dataset_args`, its `lengths_column` defaulting to `packing_column`.
        lengths: Each sample's tokens, if already known; None: loaded from `source`.
        keep_columns: Columns of the samples carried into each batch beside `sample_ids`
            (a user's document id, say): one value per entry of `sample_ids`, a tensor for
            numbers, else a list. None: none.
        **dataset_args: The StreamingDataset's keyword arguments, without a `source`
            (refused beside one: they go to it).
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
        collator: PackCollator | None = None,
        packing: bool = True,
        source: PackSource | None = None,
        lengths: np.ndarray | None = None,
        keep_columns: str | Sequence[str] | None = None,
        **dataset_args: Any,
    ) -> None:
        from streaming.packing.collate import PackCollator

        if not packing:
            raise ArgumentError("PackedStreamingDataset always packs; use StreamingDataset for "
                                "unpacked samples")
        if isinstance(packs_per_batch, bool) or not isinstance(packs_per_batch, int) \
                or packs_per_batch < 1:
            raise PlanError(f"packs_per_batch must be a positive int, got {packs_per_batch!r}")
        make_packer(packing_strategy, packing_length, filter_overlong=filter_overlong,
                    overlong=overlong, buffer_size=packing_buffer_size)  # validate early
        if source is not None and dataset_args:
            raise ArgumentError(f"with `source`, dataset arguments {sorted(dataset_args)} go "
                                "to it")
        self.packing_length = int(packing_length)
        self.packing_column = packing_column
        self.packs_per_batch = packs_per_batch
        self.equal_packs = equal_packs
        self.packing = {"strategy": packing_strategy, "filter_overlong": filter_overlong,
                        "overlong": overlong, "buffer_size": packing_buffer_size}
        self._split = not filter_overlong and overlong == "split"
        self.collator = collator or PackCollator(self.packing_length)
        self._cached: tuple[Any, EpochPacks] | None = None
        self.source = source if source is not None else _streaming_source(packing_column,
                                                                           dataset_args)
        try:
            self.keep_columns = check_keep_columns(keep_columns)
            self._attach(lengths)
        except BaseException:
            if source is None:  # the source built here is closed again if packing cannot start
                self.source.close()
            raise

    def _attach(self, lengths: np.ndarray | None) -> None:
        """Take the source's lengths (loaded unless given) and create this rank's resume
        point on the node."""
        if lengths is None:
            from streaming.dataset.lengths import load_lengths

            lengths = load_lengths(self.source, self.packing_column)
        self.lengths = lengths
        self._lengths_digest = xxhash.xxh3_64_hexdigest(np.ascontiguousarray(lengths, np.int64))
        self._resume_name = self.session.shared_name(f"k{self.source.world.rank_in_node}")
        self._resume_seg: SharedArray | None = SharedArray.create(self._resume_name, (2,),
                                                                  np.int64)

    def __getattr__(self, name: str) -> Any:
        """The source's public attributes (`streams`, `world`, `cache_stats`, ...)."""
        source = self.__dict__.get("source")
        if name.startswith("_") or source is None:
            raise AttributeError(name)
        return getattr(source, name)

    @property
    def session(self) -> PackSession:
        return self.source.session

    def batches_supported(self) -> bool:
        """Never: batches are packs, built by this dataset's own iteration."""
        return False

    # ----- planning ----------------------------------------------------------------------
    def rank_packs(self, epoch: int) -> EpochPacks:
        """This rank's packs for `epoch`, in canonical order (the same for any worker count)."""
        cfg = self.session.plans.config_now()
        key = (epoch, cfg.num_canonical_nodes, cfg.shuffle_seed)
        if self._cached is None or self._cached[0] != key:
            ids = self.source.rank_sample_ids(epoch)
            target = self._most_packs(epoch) if self.equal_packs else None
            plan = rank_epoch_packs(ids, self.lengths, self.packing_length, target=target,
                                    **self.packing)
            self._cached = (key, plan)
        return self._cached[1]

    def _most_packs(self, epoch: int) -> int | None:
        """The largest natural pack count of any rank in `epoch`: every rank's count is grown to
        it, so all ranks step equally. Found once per node (its ranks and DataLoader workers
        share the result through the session's plan board); each node counts its own ranks and
        the nodes swap counts (packing.equal)."""
        world = self.session.plans.rank_world()
        if world.data_parallel_ranks == 1:
            return None
        cfg = self.session.plans.config_now()
        key = (f"packs|{cfg.fingerprint()}|{cfg.num_canonical_nodes}|{cfg.shuffle_seed}|{epoch}|"
               f"{world.num_nodes}|{world.ranks_per_node}|{self._packing_identity()}|"
               f"{self._lengths_digest}")

        def count_rank(rank: World) -> int:
            ids = self.session.plans.worker_sample_ids(epoch, 0, rank)
            ids = ids[ids >= 0]
            return len(pack_lengths(self.lengths[ids], self.packing_length, **self.packing))

        return self.session.plans.node_value(key, lambda: job_most_packs(count_rank, world, key))

    def __len__(self) -> int:
        """Batches of packs this rank yields in the epoch it iterates now, or between epochs in
        the next one (equal on every rank with `equal_packs`)."""
        epoch = self.session.run.running_or_next_epoch()
        return -(-self.rank_packs(epoch).num_packs // self.packs_per_batch)

    def pack_count(self, epoch: int = 0) -> int:
        """Packs this rank yields in `epoch`."""
        return self.rank_packs(epoch).num_packs

    # ----- iteration ---------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.session.run.note_pending()
        return self._packs_of_iteration()

    def _packs_of_iteration(self) -> Iterator[dict[str, Any]]:
        session = self.session
        with session.run.iteration(settle=False) as it:
            world, start = it.world, it.start
            with session.run.failing_on_error():
                plan = self.rank_packs(start.epoch)
                mine = worker_packs(plan, self._resume_skip(start.epoch), self.packs_per_batch,
                                    world.worker, world.workers_per_rank)
                mine = mine.select(np.arange(min(start.skip, mine.num_packs), mine.num_packs))
            self._watch.begin(self._fill(mine, 0))
            yield from self._watch.timed(self._batches(mine, it), lambda: session.run.count)

    def _batches(self, plan: EpochPacks, it: Iteration) -> Iterator[dict[str, Any]]:
        import torch

        samples = self.source.read_samples(plan.ids, it.start.epoch)
        cap, per_batch = self.packing_length, self.packs_per_batch
        for lo in range(0, plan.num_packs, per_batch):
            hi = min(lo + per_batch, plan.num_packs)
            packs, ids = [], []
            kept = KeptValues(self.keep_columns)
            for k in range(lo, hi):
                pack_ids, pieces = plan.pack(k)
                sequences = []
                for sample_id, piece in zip(pack_ids.tolist(), pieces.tolist()):
                    sample = next(samples)
                    kept.add(sample_id, sample)
                    tokens = self._tokens(sample_id, sample)
                    if self._split and tokens.size > cap:
                        tokens = tokens[piece * cap:(piece + 1) * cap]
                    sequences.append(tokens)
                packs.append(sequences)
                ids.append(pack_ids)
            batch = self.collator.batch(packs)
            batch["sample_ids"] = torch.from_numpy(np.concatenate(ids))
            batch.update(kept.collated())
            it.count(hi - lo)
            yield batch

    # ----- metrics -----------------------------------------------------------------------
    @property
    def _watch(self) -> PackWatch:
        watch = self.__dict__.get("_watch_")
        if watch is None:
            watch = self.__dict__["_watch_"] = PackWatch(self.packing_length)
        return watch

    def _fill(self, plan: EpochPacks, first: int) -> Callable[[int], PackFill]:
        return lambda taken: fill_of(plan, first, taken, self.lengths, self.packing_length,
                                     self._split)

    def pack_counts(self) -> PackCounts:
        """A fresh count of pack fill, for a loader that tells it where its iterations begin
        (`fill_from_start`)."""
        return PackCounts(self.packing_length)

    def fill_from_start(self) -> Callable[[int], PackFill]:
        """The fill of the first `n` packs of this rank from where the next (or running)
        iteration starts, as the training process sees it."""
        state = self.state_after(0)
        epoch = int(state["source"]["epoch"])
        first = int(state["packs_in_epoch"]) // self.source.world.data_parallel_ranks
        return self._fill(self.rank_packs(epoch), first)

    def metrics(self) -> dict[str, float]:
        """What iterating this dataset in this process did so far (a step is one batch of
        packs, `samples` counts packs), with the `packing/...` fill of the packs taken; no
        per-stream counts (see docs/dataset.md, "Watching a run")."""
        out = self._watch.metrics()
        out.update(cache_metrics(self))
        out.update(disk_metrics(self))
        return out

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
        """The resumption state in one of two forms: after `num_samples` global packs
        (`state_after`; the StreamingDataLoader passes packs, its batches' leading size) or,
        without `num_samples`, after what this process's iteration yielded (`iteration_state`,
        torchdata's form). Either is `{"source": <the source's state at the epoch's start>,
        "packs_in_epoch": ..., "packing": <the packing setup>}`.

        Args:
            num_samples: Global packs of the current epoch a loader counted, or None.
            from_beginning: Count them from the epoch's first pack, not from where its
                iteration started.
        """
        if num_samples is None:
            return self.iteration_state()
        return self.state_after(num_samples, from_beginning=from_beginning)

    def state_after(self, num_samples: int, *, from_beginning: bool = False) -> dict[str, Any]:
        """The state after `num_samples` global packs of the current epoch (counted from where
        its iteration started, or with `from_beginning` from its first pack).

        Args:
            num_samples: Global packs of the current epoch a loader counted.
            from_beginning: Count them from the epoch's first pack.
        """
        session = self.session
        epoch = session.run.latest_epoch()
        if num_samples == 0 and session.run.running_or_next_epoch() > epoch:
            return self._packed_state(session.resume.resume_state(epoch + 1, 0), 0)  # it ended
        dp = self.source.world.data_parallel_ranks
        packs = num_samples // dp + (0 if from_beginning else self._resume_skip(epoch))
        if packs >= self.rank_packs(epoch).num_packs:
            epoch, packs = epoch + 1, 0
        return self._packed_state(session.resume.resume_state(epoch, 0), packs)

    def _packed_state(self, source: dict[str, Any], packs: int) -> dict[str, Any]:
        dp = self.source.world.data_parallel_ranks
        return {"source": source, "packs_in_epoch": packs * dp,
                "packing": self._packing_identity()}

    def iteration_state(self) -> dict[str, Any]:
        """The state after what this process's iteration yielded: the rank's packs in the
        training process; inside a DataLoader worker the packs before the iteration's start
        plus this worker's own count, beside the source state (see
        Session.iteration_state)."""
        session = self.session
        now = session.run.progress()
        epoch, packs = now.start.epoch, self._resume_skip(now.start.epoch)
        if now.slot is not None:
            resume = session.resume
            source = {**resume.resume_state(epoch, 0), "worker": resume.worker_position(now)}
            return self._packed_state(source, packs)
        if now.ended:
            return self._packed_state(session.resume.resume_state(epoch + 1, 0), 0)
        return self._packed_state(session.resume.resume_state(epoch, 0), packs + now.done)

    def _packing_identity(self) -> dict[str, Any]:
        return {**self.packing, "packing_length": self.packing_length,
                "column": self.packing_column, "packs_per_batch": self.packs_per_batch,
                "data_parallel_ranks": self.source.world.data_parallel_ranks}

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Continue from `obj` at the next iteration. A state from another packing setup or
        data-parallel world size raises StateMismatchError; with strict=False the interrupted
        epoch restarts from its beginning instead (nothing lost, some packs repeated). A flat
        state (the source's keys beside `packs_in_epoch`) loads too."""
        if not isinstance(obj, dict) or "packs_in_epoch" not in obj:
            raise StateMismatchError("not a packing state (no 'packs_in_epoch'): it was saved "
                                     "by a dataset without packing")
        same = obj.get("packing") == self._packing_identity()
        if not same and strict:
            raise StateMismatchError(
                f"packing state was saved with {obj.get('packing')!r}, this dataset has "
                f"{self._packing_identity()!r}; pass strict=False to restart the epoch")
        source = obj["source"] if "source" in obj else {
            k: v for k, v in obj.items() if k not in ("packs_in_epoch", "packing")}
        self.session.resume.load_state_dict({**source, "sample_in_epoch": 0}, strict=strict)
        packs = int(obj["packs_in_epoch"]) // self.source.world.data_parallel_ranks if same else 0
        self._resume_array()[:] = (int(source["epoch"]) + 1, packs)

    # ----- lifecycle ---------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = {**self.__dict__, "_resume_seg": None}
        state.pop("_watch_", None)  # this process's metrics (and plan closures) stay here
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def close(self) -> None:
        if self._resume_seg is not None:
            self._resume_seg.close()
            self._resume_seg = None
        self.source.close()


def _streaming_source(packing_column: str, dataset_args: dict[str, Any]) -> PackSource:
    """The StreamingDataset `dataset_args` describe, its `lengths_column` by default the
    packed column (so that `mix_unit="tokens"` mixes by the tokens packed)."""
    from streaming.dataset.streaming_dataset import StreamingDataset

    return StreamingDataset(**{"lengths_column": packing_column, **dataset_args})
