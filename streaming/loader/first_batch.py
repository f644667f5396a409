"""The first batch of a worker-backed iteration, read by the training process itself.

Starting DataLoader workers (forking them, then each one's first read) takes longer than
reading one batch. So when a StreamingDataLoader iteration is about to start its workers, the
training process reads the rank's first batch as a loader without workers would, ends that
read so that nothing of it is left when the workers fork (no prefetching thread, pinned shard,
published horizon or open generator), and hands the iteration over to the workers
(`Session.hand_over`): they join it instead of starting the next one, and deal the rank's
batches from the second on among them as they would have dealt them all. The loop sees the
same batches in the same order, and the loader's count and state keep their meaning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from torch.utils.data._utils.pin_memory import pin_memory

from streaming.errors import StateMismatchError

if TYPE_CHECKING:
    from streaming.dataset.session import Session
    from streaming.dataset.streaming_dataset import StreamingDataset


def first_batch_here(dataset: object, *, batch_size: int, drop_last: bool, num_workers: int,
                     worker_init: bool, workers_alive: bool) -> list[dict[str, Any]]:
    """The first batch of the iteration about to start, read in this process with the
    iteration handed over to the `num_workers` workers about to start; empty (nothing read,
    nothing changed) where that would not be exact or gains nothing: no workers, workers
    alive already (persistent ones), a `worker_init_fn` (it runs before a worker reads), a
    dataset other than a StreamingDataset planned for `batch_size` (the workers' batches
    would not be its planned batches), a per-worker resume point, or a rank with fewer than
    two batches (or a partial first one) in this iteration.

    Args:
        dataset: the loader's dataset.
        batch_size: the loader's batch size.
        drop_last: whether the loader drops an incomplete last batch.
        num_workers: the loader's workers.
        worker_init: whether the loader has a `worker_init_fn`.
        workers_alive: whether the loader's workers run already.
    """
    from streaming.dataset.streaming_dataset import StreamingDataset

    if not num_workers or worker_init or workers_alive:
        return []
    if not isinstance(dataset, StreamingDataset) or dataset.batch_size != batch_size:
        return []
    if not _worth_it(dataset, batch_size, drop_last):
        return []
    batches = dataset.iter_batches(batch_size, drop_last)
    try:
        first = next(batches)
    finally:
        batches.close()  # its threads joined, its horizon withdrawn, nothing pinned
    dataset.session.hand_over(num_workers, 1)
    return [first]


def _worth_it(dataset: StreamingDataset, batch_size: int, drop_last: bool) -> bool:
    """Whether the next iteration starts at a rank-wide point and gives this rank a full
    first batch and at least one more."""
    session: Session = dataset.session
    try:
        start = session.next_start()
    except StateMismatchError:  # per-worker states of another worker count: workers say so
        return False
    if start.skip or start.ended:
        return False
    ids = dataset.worker_sample_ids(start.epoch, start.sample_in_epoch, session.rank_world())
    valid = ids >= 0
    count = int(np.count_nonzero(valid))
    if len(ids) < batch_size or not valid[:batch_size].all():
        return False
    return count >= 2 * batch_size if drop_last else count > batch_size


def pinned(batches: list[dict[str, Any]], workers: Iterator[Any]) -> list[dict[str, Any]]:
    """`batches` in pinned memory when the DataLoader iterator `workers` pins what its
    workers send (a loader with `pin_memory` on a machine with an accelerator).

    Args:
        batches: the batches read in this process.
        workers: the DataLoader's iterator over its workers.
    """
    if not batches or not getattr(workers, "_pin_memory", False):
        return batches
    device = getattr(workers, "_pin_memory_device", None)
    return [pin_memory(batch, device) for batch in batches]


def workers_started(dataset: object) -> None:
    """The workers of an iteration `first_batch_here` handed over have started (or failed
    to): workers started later by this process begin an iteration of their own.

    Args:
        dataset: the loader's dataset.
    """
    session = getattr(dataset, "session", None)
    forget = getattr(session, "forget_hand_over", None)
    if callable(forget):
        forget()

