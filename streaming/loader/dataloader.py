"""StreamingDataLoader: a DataLoader that can checkpoint how far the training loop really got."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from multiprocessing.context import BaseContext
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from streaming.coord.proc import ProcessId
from streaming.loader import worker_ring as transport
from streaming.loader.batch_stream import BatchStream
from streaming.loader.checks import check_batch_size, check_cache_for_workers, check_resumable
from streaming.loader.dataset_protocols import (
    BatchSource,
    DataParallelDataset,
    PackedDataset,
    ResumableDataset,
    planned_by,
)
from streaming.loader.default_collate import (
    batch_length,
    collate,
    collate_numpy,
    convert,
    tensors,
)
from streaming.loader.first_batch import first_batch_here, handing_over, pinned, taken_over
from streaming.loader.stall_watch import StallWatch, Waiting, after_from_env
from streaming.loader.unannotated_next import unannotated
from streaming.loader.worker_stop import stop_workers
from streaming.observe.counters import ReadCounted, ReadTotals
from streaming.observe.metrics import (
    Meter,
    StreamCounts,
    WorkerReads,
    cache_metrics,
    disk_metrics,
    every_from_env,
    log_summary,
    stream_counts,
)
from streaming.util.exit_close import closed_at_exit


def _stream_counts(dataset: Dataset[Any]) -> StreamCounts | None:
    """Per-stream counts for a StreamingDataset (other datasets, packed ones included, do
    not yield the planned samples one for one)."""
    from streaming.dataset.streaming_dataset import StreamingDataset

    return stream_counts(dataset) if isinstance(dataset, StreamingDataset) else None


def _unwrap(batch: Any) -> Any:
    return batch


_TORCH_KEYWORDS = frozenset(inspect.signature(DataLoader.__init__).parameters)


def torch_options(**options: Any) -> dict[str, Any]:
    """`options` for torch's DataLoader, less those this torch's DataLoader does not take that
    are left at their default (`in_order` is newer than some torch versions users have); a
    value set otherwise reaches torch, which refuses it as it would have.

    Args:
        **options: StreamingDataLoader's keywords, by name.
    """
    return {name: value for name, value in options.items()
            if name in _TORCH_KEYWORDS or value != _DEFAULTS[name]}


_END = object()  # the end of the workers' batches


class _Handed:
    """What the running iteration has handed to the loop, and the part of it the meter has
    not been told yet (it is told at the first batch, whenever metrics are asked or a summary
    is due to be logged, and when the iteration ends). A plain slotted object, because
    setting an attribute of a DataLoader runs torch's `DataLoader.__setattr__` (a Python call,
    about a microsecond), too slow for counts bumped on every batch."""

    __slots__ = ("batches", "due", "samples", "timed", "told_batches", "told_samples", "wait_ns")

    def __init__(self) -> None:
        self.batches = 0
        self.samples = 0
        self.timed = False  # the loop times its waits (collect_metrics)
        self.wait_ns = 0  # waited since the meter was last told
        self.told_batches = 0
        self.told_samples = 0
        self.due = 1  # the batch count at which the meter is told next


class StreamingDataLoader(DataLoader):
    """DataLoader whose `state_dict()` counts only batches handed to the user.

    Samples that workers prefetched but the loop never received are not counted, so a resume
    neither skips nor repeats them. Works with any dataset that has the StreamingDataset
    `state_dict(num_samples, from_beginning)` / `load_state_dict(obj)` methods. Batches are
    collated by `streaming.loader.default_collate.collate` unless a `collate_fn` is given
    (docs/dataset.md). `loader.dataset` is the dataset given, whichever path reads it. With
    workers, an iteration's first batch is read in the training process before they start
    (`streaming.loader.first_batch`; `loader.first_batch_in_process = False` turns it off).

    The arguments are `torch.utils.data.DataLoader`'s, with the same defaults.

    Args:
        dataset: The dataset (a StreamingDataset, or any dataset with its state methods).
        batch_size: Samples per batch (None: the dataset yields whole batches, as a
            PackedStreamingDataset does).
        shuffle: Leave None: a StreamingDataset shuffles itself (`shuffle=` on the dataset).
        sampler: A sampler for map-style datasets (turns off the whole-batch fast path).
        batch_sampler: A sampler of index batches (turns off the whole-batch fast path).
        num_workers: Worker processes reading and collating batches; 0 reads in this process.
        collate_fn: Turns a list of samples into a batch; None: our default collate.
        pin_memory: Copy batches into pinned memory before returning them.
        drop_last: Drop the last incomplete batch of each epoch.
        timeout: Seconds to wait for a batch from a worker (0: no limit, torch's default).
        worker_init_fn: Called in each worker process with its worker id.
        multiprocessing_context: How workers start (`"fork"`, `"spawn"`, `"forkserver"`).
        generator: The random generator torch's samplers and worker seeds draw from.
        prefetch_factor: Batches each worker reads ahead (torch's default 2 with workers).
        persistent_workers: Keep the worker processes between epochs.
        pin_memory_device: The device pinned memory is for (`""`: the current accelerator).
        in_order: Return batches in the order the workers were given them.
    """

    def __init__(
        self, dataset: Dataset[Any], batch_size: int | None = 1, shuffle: bool | None = None,
        sampler: Sampler[Any] | Iterable[Any] | None = None,
        batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None,
        num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: str | BaseContext | None = None,
        generator: torch.Generator | None = None, *, prefetch_factor: int | None = None,
        persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True,
    ) -> None:
        check_batch_size(planned_by(dataset), batch_size)
        options = torch_options(
            shuffle=shuffle, sampler=sampler, batch_sampler=batch_sampler,
            num_workers=num_workers, pin_memory=pin_memory, timeout=timeout,
            worker_init_fn=worker_init_fn, multiprocessing_context=multiprocessing_context,
            generator=generator, prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers, pin_memory_device=pin_memory_device,
            in_order=in_order)
        default_collate = collate_fn is None
        plain = sampler is None and batch_sampler is None and not shuffle
        self._batch_stream: BatchStream | None = None
        self._handed = _Handed()
        if default_collate and plain and batch_size and isinstance(dataset, BatchSource) \
                and dataset.batches_supported():
            # Fast path: workers read and collate whole batches (see BatchStream).
            self._batch_stream = BatchStream(dataset, batch_size, drop_last)
            super().__init__(self._batch_stream, None, collate_fn=_unwrap, **options)
            # DataLoader only forbids re-setting these after __init__; report what the user
            # asked for (len(loader) then counts batches, as the dataset's len counts samples).
            # `dataset` is the user's; iterators are built over the BatchStream (_get_iterator).
            object.__setattr__(self, "batch_size", batch_size)
            object.__setattr__(self, "drop_last", drop_last)
            object.__setattr__(self, "dataset", dataset)
        else:
            super().__init__(dataset, batch_size, collate_fn=collate_fn, drop_last=drop_last,
                             **options)
            if default_collate:
                self.collate_fn = collate if self.batch_sampler is not None else convert
        self._own_collate = default_collate
        self._receiver: transport.Receiver | None = None
        self._running_len: int | None = None
        self._finished = False  # the last iteration ran to its end
        check_resumable(self.dataset, self.num_workers, self.batch_size)
        check_cache_for_workers(self.dataset, self.num_workers)
        self._meter = Meter()
        self._streams = _stream_counts(dataset)
        self._packs = dataset.pack_counts() if isinstance(dataset, PackedDataset) else None
        self._reads: WorkerReads | None = None  # the running workers' disk reads
        self._reads_before = ReadTotals()  # what the workers before them read
        self.metrics_every = every_from_env()  # log a summary every N batches (0: never)
        self.collect_metrics = True  # False: no timing at all (the overhead benchmark's baseline)
        # False: the workers read every batch (see streaming.loader.first_batch)
        self.first_batch_in_process = True
        self.stall_report_s = after_from_env()  # see streaming.loader.stall_watch (0: off)

    def __len__(self) -> int:
        """Batches of the running iteration (fixed when it starts: DataLoader workers run ahead
        of the loop, so the dataset may already count the next epoch's), else of the next."""
        if self._running_len is not None:
            return self._running_len
        return super().__len__()

    @property
    def num_samples_yielded(self) -> int:
        """Samples the running (or last) iteration handed to the loop."""
        return self._handed.samples

    @num_samples_yielded.setter
    def num_samples_yielded(self, value: int) -> None:
        self._handed.samples = int(value)

    def __iter__(self) -> Iterator[Any]:
        return closed_at_exit(self._iterate())

    def _iterate(self) -> Generator[Any, None, None]:
        self._handed = _Handed()
        self._running_len, self._finished = None, False
        with contextlib.suppress(TypeError, NotImplementedError):  # a dataset without a length
            self._running_len = super().__len__()
        try:
            yield from self._batches()
            self._finished = True
        finally:
            self._running_len = None

    def _get_iterator(self) -> Any:
        """torch's iterator, built over the BatchStream on the fast path (its workers read
        whole batches) while `self.dataset` stays the user's dataset."""
        if self._batch_stream is None:
            return super()._get_iterator()
        object.__setattr__(self, "dataset", self._batch_stream)
        try:
            return super()._get_iterator()
        finally:
            object.__setattr__(self, "dataset", self._batch_stream.dataset)

    def _batches(self) -> Iterator[Any]:
        # Workers send numpy batches (one pickle through the pipe), made tensors here.
        numpy = self._own_collate and self.num_workers > 0 and not self.pin_memory
        receiver = None
        if self._batch_stream is not None:
            self._batch_stream.numpy = numpy
            if numpy:
                receiver = self._ring_receiver()
        elif self._own_collate and self.batch_sampler is not None:
            self.collate_fn = collate_numpy if numpy else collate
        meter = self._meter if self.collect_metrics else None
        handed = self._handed
        handed.timed = meter is not None
        if meter is not None:
            meter.start()
        self._count_worker_reads()
        unsized = int(self.batch_size or 1)  # counted for a batch whose length is not found
        clock = time.perf_counter_ns
        asked = clock()
        first: list[Any] = []
        try:
            first = self._first_batch()
            source = itertools.chain(pinned(first, self.pin_memory),
                                     self._received(len(first), receiver, numpy))
            if meter is None:
                for batch in source:
                    size = batch_length(batch)
                    handed.batches += 1
                    handed.samples += size if size is not None else unsized
                    yield batch
                return
            for batch in source:
                now = clock()
                size = batch_length(batch)
                handed.batches += 1
                handed.samples += size if size is not None else unsized
                handed.wait_ns += now - asked
                if handed.batches >= handed.due:
                    self._tell_meter(now)
                yield batch
                asked = clock()
        finally:
            if meter is not None:
                self._tell_meter(time.perf_counter_ns())
            if self._streams is not None:
                self._streams.fold(self._meter.samples)
            if self._packs is not None:
                self._packs.fold(self._meter.samples)
            if receiver is not None and not self.persistent_workers:
                receiver.close()
            if first:  # the iteration is over before every worker delivered a batch
                self.dataset.withdraw_horizon()

    def _tell_meter(self, now_ns: int) -> None:
        """Hand the meter the batches of a timed iteration it has not counted yet (at its
        first batch, point the per-stream counts at it), log a summary when one is due, and
        set the batch at which the loop tells the meter next (the next summary's, if any)."""
        handed, meter = self._handed, self._meter
        if not handed.timed or handed.batches <= handed.told_batches:
            return
        if not handed.told_batches:
            self._begin_streams()
        meter.add(handed.batches - handed.told_batches,
                  max(handed.samples - handed.told_samples, 0), handed.wait_ns, now_ns)
        handed.told_batches, handed.told_samples, handed.wait_ns = \
            handed.batches, handed.samples, 0
        every = self.metrics_every
        handed.due = sys.maxsize
        if every:
            since = meter.steps % every
            if not since:
                log_summary(self.metrics())
            handed.due = handed.batches + every - since

    def _first_batch(self) -> list[Any]:
        """The iteration's first batch when this process reads it, the workers starting only
        after the loop got it (streaming.loader.first_batch), else nothing."""
        if self._batch_stream is None or not self.first_batch_in_process:
            return []
        return first_batch_here(
            self.dataset, batch_size=int(self.batch_size or 0), drop_last=self.drop_last,
            num_workers=self.num_workers, worker_init=self.worker_init_fn is not None,
            workers_alive=self.persistent_workers and self._iterator is not None)

    def _received(self, read_here: int, receiver: transport.Receiver | None,
                  numpy: bool) -> Iterator[Any]:
        """The batches of torch's iterator, out of the workers' rings and made tensors. The
        workers start when the first of them is asked for, and go on after the `read_here`
        batches this process read (a failed iteration's workers stop at once)."""
        with handing_over(self.dataset, self.num_workers, read_here):
            torch_iter = super().__iter__()
        loop = Waiting()
        watch = StallWatch(loop, self.stall_report_s, self.num_workers) if (
            self.num_workers and self.stall_report_s > 0) else None
        try:
            workers = taken_over(unannotated(torch_iter), self.dataset, self.num_workers,
                                 read_here)
            while True:
                loop.waiting = True
                batch = next(workers, _END)
                loop.waiting = False
                if batch is _END:
                    return
                loop.batches += 1
                if receiver is not None:
                    batch = receiver.unpack(batch)
                yield tensors(batch) if numpy else batch
        except Exception:
            if not self.persistent_workers:
                stop_workers(torch_iter)
            raise
        finally:
            if watch is not None:
                watch.stop()

    def _begin_streams(self) -> None:
        """Point the per-stream counts (or a packed dataset's pack fill) at the rank's planned
        order of this iteration."""
        if self._packs is not None and isinstance(self.dataset, PackedDataset):
            self._packs.begin(self.dataset.fill_from_start(), self._meter.samples)
        if self._streams is None:
            return
        source = self.dataset
        epoch, start = source.session.resume.start_point()  # where this iteration started
        world = source.session.plans.rank_world()
        self._streams.begin(lambda: source.worker_sample_ids(epoch, start, world),
                            self._meter.samples)

    def _count_worker_reads(self) -> None:
        """Give the workers about to start a fresh shared count of their disk reads (the
        dataset's tally travels to them with its sink). Workers of an earlier iteration were
        shut down when it ended, so their counts are final."""
        reads = planned_by(self.dataset)
        if not self.num_workers or not isinstance(reads, ReadCounted):
            return
        if self._reads is not None:
            if self.persistent_workers:
                return
            self._reads_before += self._reads.totals()
        self._reads = WorkerReads(self.num_workers)
        reads.read_tally().sink = self._reads

    def metrics(self) -> dict[str, float]:
        """What this rank's data path did so far, as a flat dict of floats (keys in
        docs/dataset.md, "Watching a run"): time to first batch, batches and samples per
        second, the time the loop waited for data, samples per stream (pack fill for a packed
        dataset), the cache's counters and the bytes read from local disk (by the workers
        too)."""
        self._tell_meter(time.perf_counter_ns())
        out = self._meter.as_dict()
        if self._streams is not None:
            out.update(self._streams.as_dict(self._meter.samples))
        if self._packs is not None:
            out.update(self._packs.as_dict(self._meter.samples))
        out.update(cache_metrics(planned_by(self.dataset)))
        disk = disk_metrics(planned_by(self.dataset))
        if disk and self._reads is not None:
            workers = self._reads_before + self._reads.totals()
            disk["disk/bytes_read"] += workers.bytes_read
            disk["disk/rows_read"] += workers.rows
        out.update(disk)
        return out

    def _ring_receiver(self) -> transport.Receiver:
        """The receiving end of the workers' shared-memory rings (streaming.loader.worker_ring); new
        workers (each epoch unless persistent) get a fresh ring namespace."""
        if self._receiver is None or not self.persistent_workers:
            slots = int(self.prefetch_factor or 2) + 2  # + the one being read, + slack
            assert self._batch_stream is not None
            ring = transport.RingAddress(transport.new_token(), slots, ProcessId.current())
            self._batch_stream.ring = ring
            self._receiver = transport.Receiver(ring.token)
        return self._receiver

    def state_dict(self) -> dict[str, Any] | None:
        """The dataset's resumption state after the samples this rank's loop has consumed.

        Every data-parallel rank consumes the same number of samples per step, so the global
        count is this rank's count times the number of data-parallel ranks. Taken on an epoch's
        last batch, the state ends that epoch when loaded; taken after the loop over the loader
        ended, it starts the next epoch.
        """
        dataset = self.dataset
        if not isinstance(dataset, ResumableDataset):
            return None
        planned, ranks = planned_by(dataset), 1
        if isinstance(planned, DataParallelDataset):
            ranks = int(planned.data_parallel_ranks or 1)
        consumed = 0 if self._finished else self.num_samples_yielded * ranks
        state = dataset.state_dict(consumed, False)
        at_end = self._running_len is not None and self._handed.batches >= self._running_len
        if at_end and isinstance(state, dict) and state.get("sample_in_epoch", 0) > 0:
            # Trainers that save through the loader (Lightning, torchdata) start the next
            # epoch on resume; Composer saves through the dataset and gets the reference form.
            state = {**state, "epoch": int(state["epoch"]) + 1, "sample_in_epoch": 0}
        return state

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Resume the dataset at `obj`; the next iteration starts there.

        Args:
            obj: a state from `state_dict()`.
            strict: refuse a state of a differently configured dataset.
        """
        if not isinstance(self.dataset, ResumableDataset):
            raise AttributeError(f"{type(self.dataset).__name__} has no load_state_dict: "
                                 "the loader resumes datasets that have")
        self.dataset.load_state_dict(obj, strict=strict)
        self.num_samples_yielded = 0


_DEFAULTS = {name: p.default for name, p in
             inspect.signature(StreamingDataLoader.__init__).parameters.items()}
