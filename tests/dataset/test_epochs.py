"""EpochCounter's per-worker resume points (torchdata restores each DataLoader worker from its
own state): skips per worker, the next epoch when every worker had ended, and a refusal when
another number of workers iterates; and iterations the training process began and handed over
to its workers."""

from __future__ import annotations

import secrets

import pytest

from streaming.coord.names import Namespace
from streaming.dataset.epochs import MAX_WORKERS, EpochCounter, IterationStart
from streaming.errors import CoordinationError, StateMismatchError


@pytest.fixture
def counter():
    ns = Namespace(secrets.token_hex(6))  # named like a dataset's, so leftovers are reclaimed
    c = EpochCounter(ns.name("e0"), ns.name("e0k"), create=True)
    yield c
    c.close()


def _load(c: EpochCounter, skips: list[int], ended: list[bool]) -> None:
    for w, (skip, end) in enumerate(zip(skips, ended)):
        c.set_worker_resume(3, 40, 2, 9, worker=w, num_workers=len(skips), skip=skip,
                            ended=end)


def test_each_worker_skips_its_own_count_in_iteration_zero_only(counter) -> None:
    _load(counter, [8, 4], [False, True])
    assert counter.peek(1, 2) == IterationStart(3, 40, 4, True)
    assert counter.begin_worker(0, 2) == IterationStart(3, 40, 8, False)
    assert counter.begin_worker(1, 2) == IterationStart(3, 40, 4, True)
    assert counter.begin_worker(0, 2) == IterationStart(4, 0)  # the next iteration
    assert counter.overrides() == (2, 9)


def test_every_worker_ended_means_the_next_epoch(counter) -> None:
    _load(counter, [8, 4], [True, True])
    assert counter.peek(0, 2) == IterationStart(4, 0)
    assert counter.begin_worker(1, 2) == IterationStart(4, 0)
    assert counter.begin_worker(0, 2) == IterationStart(4, 0)
    assert counter.current() == (4, 0)


def test_another_worker_count_is_refused_and_a_rank_resume_clears(counter) -> None:
    _load(counter, [8, 4], [False, False])
    with pytest.raises(StateMismatchError, match="num_workers=2"):
        counter.begin_worker(0, 3)
    counter.set_resume(5, 0, 2, 9)
    assert counter.begin_worker(0, 3) == IterationStart(5, 0)


def test_the_running_epoch_until_every_worker_of_it_finished(counter) -> None:
    counter.set_resume(2, 0, 1, 0)
    assert counter.running_or_next() == 2  # nothing began: the resume point's epoch
    counter.begin_worker(0, 2)
    counter.begin_worker(1, 2)
    assert counter.running_or_next() == 2
    counter.finish(2)
    assert counter.running_or_next() == 2  # worker 1 still runs epoch 2
    counter.finish(1)  # a stale finish of another epoch counts for nothing
    assert counter.running_or_next() == 2
    counter.finish(2)
    assert counter.running_or_next() == 3  # all finished: the next iteration's epoch
    counter.begin_worker(0, 2)  # iteration of epoch 3 begins: its workers start unfinished
    assert counter.running_or_next() == 3
    counter.set_resume(7, 10, 1, 0)
    assert counter.running_or_next() == 7


def test_workers_join_an_iteration_the_training_process_handed_over(counter) -> None:
    counter.set_resume(2, 40, 1, 0)
    assert counter.begin_worker(0, 1) == IterationStart(2, 40)  # the training process
    token = counter.hand_over(2, 1)
    assert counter.peek(1, 2, token) == IterationStart(2, 40, handed=1)
    assert counter.peek(1, 2) == IterationStart(3, 0)  # workers without the token
    assert counter.begin_worker(1, 2, token) == IterationStart(2, 40, handed=1)
    assert counter.begin_worker(0, 2, token) == IterationStart(2, 40, handed=1)
    assert counter.current() == (2, 40)  # the iteration still starts where it did
    counter.finish(2)
    assert counter.running_or_next() == 2  # one of the two workers still runs it
    counter.finish(2)
    assert counter.running_or_next() == 3
    assert counter.begin_worker(0, 2) == IterationStart(3, 0)  # the next one is the workers'
    assert counter.begin_worker(1, 2, token) == IterationStart(3, 0)  # a stale token
    assert counter.begin_worker(0, 1) == IterationStart(4, 0)
    token = counter.hand_over(3, 2)
    counter.set_resume(7, 0, 1, 0)  # a loaded state forgets the hand-over
    assert counter.begin_worker(0, 3, token) == IterationStart(7, 0)


def test_one_worker_joins_the_training_process_in_its_own_row(counter) -> None:
    """With one DataLoader worker, the training process and the worker share a row: the token
    alone tells the worker to join."""
    assert counter.begin_worker(0, 1) == IterationStart(0, 0)
    token = counter.hand_over(1, 1)
    assert counter.begin_worker(0, 1, token) == IterationStart(0, 0, handed=1)
    counter.finish(0)
    assert counter.running_or_next() == 1
    assert counter.begin_worker(0, 1) == IterationStart(1, 0)


def test_only_a_begun_iteration_can_be_handed_over(counter) -> None:
    with pytest.raises(CoordinationError, match="iteration this process began"):
        counter.hand_over(2, 1)


@pytest.mark.parametrize("num_workers", [0, MAX_WORKERS + 1])
def test_a_worker_count_outside_the_counter_is_refused(counter, num_workers) -> None:
    message = f"at most {MAX_WORKERS} DataLoader workers, got {num_workers}"
    with pytest.raises(CoordinationError, match=message):
        counter.begin_worker(0, num_workers)
    with pytest.raises(CoordinationError, match=message):
        counter.peek(0, num_workers)
