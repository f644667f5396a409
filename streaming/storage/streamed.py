"""Deliver an object's bytes, in order, to a consumer while they arrive.

For work that can start before the object is complete, such as decompressing a shard on its
way to the cache (no compressed copy is written and read back). A plain GET that fails midway
resumes from the first byte not yet delivered, so a retry never repeats bytes the consumer has
seen. Objects from `range_threshold` bytes up come down as parallel ranges, at most
`max_parts` in flight, each retried on its own and delivered in order as soon as the parts
before it have been.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from streaming.storage.backend import Backend, check_size
from streaming.storage.ranged import read_part, spans
from streaming.storage.retry import BACKOFF, DEADLINE, RETRY, TIMEOUT, RetryPolicy
from streaming.storage.transfer import MiB, timed_backend, transfer_policy


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
        _in_order_ranges(backend, path, size, consume, policy, part_size, max_parts)
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


def _in_order_ranges(backend: Backend, path: str, size: int, consume: Callable[[bytes], None],
                     policy: RetryPolicy, part_size: int, max_parts: int) -> None:
    parts = iter(spans(size, part_size))
    window: deque[Future] = deque()
    with ThreadPoolExecutor(max_parts, "range-part") as pool:

        def submit() -> None:
            part = next(parts, None)
            if part is not None:
                window.append(pool.submit(read_part, backend, path, size, *part, policy))

        try:
            for _ in range(max_parts):
                submit()
            while window:
                data = window.popleft().result()
                submit()
                consume(data)
        finally:
            for future in window:
                future.cancel()
