"""Deliver an object's bytes, in order, to a consumer while they arrive.

For work that can start before the object is complete, such as decompressing a shard on its
way to the cache (no compressed copy is written and read back). A plain GET that fails midway
resumes from the first byte not yet delivered, so a retry never repeats bytes the consumer has
seen. Objects from `range_threshold` bytes up may come down as parallel ranges, at most
`max_parts` in flight, each retried on its own from its first byte not yet received. Such a
transfer starts as one GET; it widens into parallel ranges only when the consumer is seen
waiting for bytes, so a consumer slower than one connection (decompression on a fast link)
keeps a single stream, and a fast one gets the bandwidth of several.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from streaming.storage.arriving import ArrivingRange
from streaming.storage.backend import Backend, check_size
from streaming.storage.ranged import spans
from streaming.storage.retry import BACKOFF, DEADLINE, RETRY, TIMEOUT, RetryPolicy
from streaming.storage.transfer import MiB, timed_backend, transfer_policy

JUDGE_BYTES = 2 * MiB  # bytes a single GET delivers before its pace is judged
WAIT_SHARE = 0.25  # a consumer that waited this share of the time is network-bound


def stream_object(
    url: str, consume: Callable[[bytes], None], *, size: int, timeout: float = TIMEOUT,
    retry: int = RETRY, range_threshold: int = 16 * MiB, part_size: int = 8 * MiB,
    max_parts: int = 8, backoff: float = BACKOFF, deadline: float = DEADLINE,
) -> None:
    """Call `consume(piece)` with the `size` bytes of `url` in order. Transfer failures are
    retried (`retry` more attempts of at most `timeout` s each; "slow down" answers until
    `deadline` s have passed); a consumer's exception stops the transfer and propagates."""
    policy = transfer_policy(timeout, retry, backoff, url, deadline)
    backend, path = timed_backend(url, timeout)
    if backend.parallel_ranges and max_parts > 1 and size >= range_threshold:
        in_order_ranges(backend, path, size, consume, policy, part_size, max_parts)
    else:
        _resuming_get(backend, path, size, consume, policy)


def _resuming_get(backend: Backend, path: str, size: int, consume: Callable[[bytes], None],
                  policy: RetryPolicy) -> None:
    url = backend.url(path)
    delivered = 0

    def attempt(deadline: float) -> None:
        nonlocal delivered
        if delivered and delivered == size:
            return  # everything arrived; the previous attempt failed only after the last byte
        for piece in backend.chunks(path, delivered or None, None, deadline=deadline):
            delivered += len(piece)
            if delivered > size:
                check_size(url, delivered, size)
            consume(piece)
        check_size(url, delivered, size)  # truncated: the next attempt resumes from here

    policy.run(url, attempt)


@dataclass
class _Pace:
    """Whether a consumer of one GET mostly waits for its bytes: it waited at least
    `WAIT_SHARE` of the time since the first piece, once `JUDGE_BYTES` have passed."""

    first: float | None = None
    taken: int = 0

    def network_bound(self, piece: int, waited: float) -> bool:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
            return False
        self.taken += piece
        return self.taken >= JUDGE_BYTES and waited >= WAIT_SHARE * (now - self.first)


def in_order_ranges(backend: Backend, path: str, size: int, consume: Callable[[bytes], None],
                    policy: RetryPolicy, part_size: int, max_parts: int) -> None:
    """Call `consume(piece)` with the object's bytes in order, on the calling thread.

    One GET streams the object from its start. Once the consumer is seen waiting for bytes
    (the network, not the consumer, sets the pace), that GET is cut `part_size` bytes ahead
    and the rest comes as parallel ranges of `part_size`, at most `max_parts` in flight (the
    one being consumed among them), each taken as it arrives once the ranges before it are.

    Args:
        backend: The store holding the object.
        path: The object's path in `backend`.
        size: The object's size, as the index gives it.
        consume: Called with each piece, in order.
        policy: Retries and deadlines for each GET.
        part_size: Bytes per range.
        max_parts: GETs in flight at most.
    """
    head = ArrivingRange(backend, path, size, 0, size)
    window: deque[ArrivingRange] = deque([head])
    later: Iterator[tuple[int, int]] = iter(())
    pace: _Pace | None = _Pace()
    with ThreadPoolExecutor(max_parts, "range-part") as pool:

        def submit(part: tuple[int, int] | None) -> None:
            if part is not None:
                window.append(ArrivingRange(backend, path, size, *part))
                pool.submit(window[-1].fill, policy)

        pool.submit(head.fill, policy)
        try:
            while window:
                for piece in window[0].take():
                    consume(piece)
                    if pace is not None and pace.network_bound(len(piece), head.waited):
                        pace = None
                        later = iter(spans(size, part_size, head.cut(part_size)))
                        for _ in range(max_parts - 1):
                            submit(next(later, None))
                window.popleft()
                submit(next(later, None))
        finally:
            for part in window:
                part.stop()
