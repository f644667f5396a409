"""Running one blocking call (a fetch, mostly) over many items on a bounded number of threads,
with the results, and the failure reported, as if the calls had run one after the other."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
