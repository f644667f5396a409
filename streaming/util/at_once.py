"""Running one blocking call (a fetch, mostly) over many items on a bounded number of threads,
with the results, and the failure reported, as if the calls had run one after the other."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_at_once(call: Callable[[Item], Result], items: Sequence[Item], at_once: int, *,
                name: str = "streaming-at-once") -> list[Result]:
    """`[call(item) for item in items]`, with up to `at_once` calls in flight.

    On a failure (or an interrupt) the calls not begun are dropped and the error of the first
    failing item in order is raised, without waiting for the calls under way: each must end
    within its own deadline. On success every thread has ended, so none is left for a fork
    (DataLoader workers) to copy. With `at_once` below 2 or a single item, the calls run one
    after the other in the calling thread.

    Args:
        call: what to do with one item; its exceptions reach the caller.
        items: the items, in the order of the results.
        at_once: calls in flight at most.
        name: prefix of the threads' names.
    """
    if at_once < 2 or len(items) < 2:
        return [call(item) for item in items]
    pool = ThreadPoolExecutor(min(at_once, len(items)), thread_name_prefix=name)
    futures = [pool.submit(call, item) for item in items]
    try:
        results = [future.result() for future in futures]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def run_as_they_come(call: Callable[[Item], object], items: Iterable[Item], at_once: int, *,
                     name: str = "streaming-at-once") -> None:
    """`call(item)` for each of `items`, on up to `at_once` threads, each call started as soon
    as its item is produced: taking the next item (which may block, in the calling thread)
    overlaps the calls on the items before it.

    As `map_at_once`: on a failure (or an interrupt), in a call or in producing an item, the
    calls not begun are dropped and the first error in item order is raised without waiting for
    the calls under way; on success every thread has ended. With `at_once` below 2 the calls
    run one after the other in the calling thread.

    Args:
        call: what to do with one item; its exceptions reach the caller.
        items: the items, produced in the calling thread.
        at_once: calls in flight at most.
        name: prefix of the threads' names.
    """
    if at_once < 2:
        for item in items:
            call(item)
        return
    pool = ThreadPoolExecutor(at_once, thread_name_prefix=name)
    futures = []
    try:
        for item in items:
            futures.append(pool.submit(call, item))
        for future in futures:
            future.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
