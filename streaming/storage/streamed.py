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

JUDGE_BYTES = 1 * MiB  # bytes a single GET delivers after its first piece before its pace is judged
WAIT_SHARE = 0.25  # a consumer that waited this share of the time is network-bound
MIN_PART = 1 * MiB  # the smallest range a widened transfer asks for
GRACE = 30.0  # seconds a range's consumer waits beyond its retry budget before giving up


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
        _resuming_get(backend, path, size, consume, policy, None)


@dataclass
class _Pace:
    """Whether a consumer of one GET mostly waits for its bytes: it waited at least
    `WAIT_SHARE` of the time since the first piece, once `JUDGE_BYTES` have passed."""

    first: float | None = None
    taken: int = 0
    waited: float = 0.0

    def network_bound(self, piece: int, waited: float) -> bool:
        """Count one piece that kept the consumer waiting `waited` seconds for it."""
        now = time.perf_counter()
        if self.first is None:  # the wait for the first byte is the store's latency
            self.first = now
            return False
        self.taken += piece
        self.waited += waited
        return self.taken >= JUDGE_BYTES and self.waited >= WAIT_SHARE * (now - self.first)


def _resuming_get(backend: Backend, path: str, size: int, consume: Callable[[bytes], None],
                  policy: RetryPolicy, widen: Callable[[int], int] | None) -> None:
    """One GET of the whole object; a retry resumes from the first byte not yet delivered.
    With `widen`, once the consumer is seen waiting for bytes, `widen(delivered)` hands the
    object from some byte on to other GETs and returns that byte, where this GET then ends."""
    url = backend.url(path)
    delivered, end = 0, size
    pace = _Pace() if widen is not None else None

    def attempt(deadline: float) -> None:
        nonlocal delivered, end, pace
        if delivered and delivered == end:
            return
        pieces = backend.chunks(path, delivered or None, None if end == size else end,
                                deadline=deadline)
        asked = time.perf_counter()
        for piece in pieces:
            arrived = time.perf_counter()
            piece = piece[:end - delivered] if end < size else piece
            delivered += len(piece)
            if delivered > size:
                check_size(url, delivered, size)
            consume(piece)
            if pace is not None and widen is not None and pace.network_bound(
                    len(piece), arrived - asked):
                pace, end = None, widen(delivered)
            if delivered >= end and end < size:
                pieces.close()  # the rest is other GETs' (this connection is not reused)
                return
            asked = time.perf_counter()
        check_size(url, delivered, end)  # truncated: the next attempt resumes from here

    policy.run(url, attempt)


def in_order_ranges(backend: Backend, path: str, size: int, consume: Callable[[bytes], None],
                    policy: RetryPolicy, part_size: int, max_parts: int) -> None:
    """Call `consume(piece)` with the object's bytes in order, on the calling thread.

    One GET streams the object from its start. Once the consumer is seen waiting for bytes
    (the network, not the consumer, sets the pace), that GET is cut a little ahead and the
    rest comes as parallel ranges, at most `max_parts` GETs in flight (the one being consumed
    among them), each taken as it arrives once the ranges before it are. The ranges split what
    is left evenly over the GETs allowed, in parts of at most `part_size` (at least 1 MiB).

    Args:
        backend: The store holding the object.
        path: The object's path in `backend`.
        size: The object's size, as the index gives it.
        consume: Called with each piece, in order.
        policy: Retries and deadlines for each GET.
        part_size: Bytes per range, at most.
        max_parts: GETs in flight at most.
    """
    window: deque[ArrivingRange] = deque()
    later: Iterator[tuple[int, int]] = iter(())
    with ThreadPoolExecutor(max_parts, "range-part") as pool:

        def submit(part: tuple[int, int] | None) -> None:
            if part is not None:
                window.append(ArrivingRange(backend, path, size, *part,
                                            patience=policy.budget() + GRACE))
                pool.submit(window[-1].fill, policy)

        def widen(delivered: int) -> int:
            nonlocal later
            share = -(-(size - delivered) // max_parts)  # so that all GETs end together
            part = min(max(share, MIN_PART), part_size)
            if delivered + part >= size:
                return size
            later = iter(spans(size, part, delivered + part))
            for _ in range(max_parts - 1):
                submit(next(later, None))
            return delivered + part

        try:
            _resuming_get(backend, path, size, consume, policy, widen)
            while window:
                for piece in window[0].take():
                    consume(piece)
                window.popleft()
                submit(next(later, None))
        finally:
            for part in window:
                part.stop()
