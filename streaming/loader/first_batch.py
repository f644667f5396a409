"""The first batch of a worker-backed iteration, read by the training process itself.

Starting DataLoader workers (forking them, then each one's first read) takes longer than
reading one batch. So when a StreamingDataLoader iteration would start its workers, the
training process reads the rank's first batch as a loader without workers would, and ends that
read so that nothing of it runs or holds a shard when the workers fork (no prefetching thread,
pinned shard or open generator). Under a cache limit, the shards that read would read next (the
first batch's, read again later, and those it prefetched) stay wanted in the node's cache until
every worker has delivered a batch and so published what it reads next (`taken_over`): dropped
earlier, they would be the first shards eviction takes while the workers start, and be
downloaded again. Not when a cache limit is in force and the node's cache already holds shards
(a second epoch, a warm disk): there that read is the first to make room, before the node's
other readers have said what they read next, and it evicts shards they read within the first
moments, downloaded again (tests/cache/engine/test_egress_nodes.py). The loop gets that batch
at once. The workers start when
it asks for the next one (a fork costs the training process about as much as the read, so the
first batch does not wait for it, and a loop that stops after one batch starts none), and the
iteration is handed over to them (`handing_over`): they join it instead of starting the next
one, and deal the rank's batches from the second on among them as they would have dealt them
all. The loop sees the same batches in the same order, and the loader's count and state keep
their meaning.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data._utils.pin_memory import pin_memory as pin_memory_of

from streaming.errors import StateMismatchError

if TYPE_CHECKING:
    from streaming.dataset.session import Session
    from streaming.dataset.streaming_dataset import StreamingDataset


def first_batch_here(dataset: object, *, batch_size: int, drop_last: bool, num_workers: int,
                     worker_init: bool, workers_alive: bool) -> list[dict[str, Any]]:
    """The first batch of the iteration about to start, read in this process, for the
    `num_workers` workers to go on after it (`handing_over`); empty (nothing read, nothing
    changed) where that would not be exact or gains nothing: no workers, workers
    alive already (persistent ones), a `worker_init_fn` (it runs before a worker reads), a
    dataset other than a StreamingDataset planned for `batch_size` (the workers' batches
    would not be its planned batches), a cache limit over a cache that holds shards already,
    a per-worker resume point, or a rank with fewer than two batches (or a partial first one)
    in this iteration.

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
    if _warm_under_a_limit(dataset):
        return []
    if not _worth_it(dataset, batch_size, drop_last):
        return []
    batches = dataset.iter_batches(batch_size, drop_last, handed_on=True)
    try:
        first = next(batches)
    except BaseException:
        batches.close()
        dataset.withdraw_horizon()
        raise
    batches.close()  # its threads joined, nothing pinned; its horizon kept for the workers
    return [first]


def taken_over(batches: Iterator[Any], dataset: object, num_workers: int,
               read_here: int) -> Iterator[Any]:
    """The workers' `batches`; once each of the `num_workers` workers has delivered one (so
    each has published the shards it reads next), the shards this process's read of the first
    `read_here` batches would have read next are no longer kept from eviction.

    Args:
        batches: the batches of the loader's workers, in order (one from each in turn).
        dataset: the loader's dataset (a StreamingDataset when `read_here` > 0).
        num_workers: the loader's workers.
        read_here: the batches `first_batch_here` read.
    """
    if not read_here:
        yield from batches
        return
    for delivered, batch in enumerate(batches, 1):
        if delivered == num_workers:
            dataset.withdraw_horizon()
        yield batch


def _warm_under_a_limit(dataset: StreamingDataset) -> bool:
    """Whether a cache_limit is in force and the node's cache holds shards already (making room
    there evicts shards the node's other readers may not have announced yet)."""
    cache = dataset.cache
    if cache is None or cache.node_limit() is None:
        return False
    table = cache.table
    return table.used() > table.other_bytes


def _worth_it(dataset: StreamingDataset, batch_size: int, drop_last: bool) -> bool:
    """Whether the next iteration starts at a rank-wide point and gives this rank a full
    first batch and at least one more."""
    session: Session = dataset.session
    try:
        start = session.run.next_start()
    except StateMismatchError:  # per-worker states of another worker count: workers say so
        return False
    if start.skip or start.ended:
        return False
    ids = dataset.worker_sample_ids(start.epoch, start.sample_in_epoch, session.plans.rank_world())
    valid = ids >= 0
    count = int(np.count_nonzero(valid))
    if len(ids) < batch_size or not valid[:batch_size].all():
        return False
    return count >= 2 * batch_size if drop_last else count > batch_size


def pinned(batches: list[dict[str, Any]], pin_memory: bool) -> list[dict[str, Any]]:
    """`batches` in pinned memory where the loader's workers' batches would be: with
    `pin_memory`, on a machine with an accelerator that supports it (as torch decides).

    Args:
        batches: the batches read in this process.
        pin_memory: the loader's `pin_memory`.
    """
    if not batches or not pin_memory or not torch.accelerator.is_available():
        return batches
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is None or accelerator.type == "mps":  # torch does not pin for MPS
        return batches
    return [pin_memory_of(batch, accelerator.type) for batch in batches]


@contextmanager
def handing_over(dataset: StreamingDataset, num_workers: int, batches: int) -> Iterator[None]:
    """The workers started in the block go on with the iteration this process began, after
    the first `batches` batches of the rank that it read (none: they begin their own).

    Args:
        dataset: the loader's dataset (a StreamingDataset when `batches` > 0).
        num_workers: the workers started in the block.
        batches: the batches `first_batch_here` read.
    """
    if not batches:
        yield
        return
    session = dataset.session
    session.run.hand_over(num_workers, batches)
    try:
        yield
    finally:
        session.run.forget_hand_over()  # workers started later begin an iteration of their own
