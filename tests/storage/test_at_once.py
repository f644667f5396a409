"""map_at_once: results in the items' order, calls overlapping up to the bound, the first
failure in order raised without waiting for calls under way, and no thread left behind.
run_as_they_come: the same, each call started while the next items are still being produced."""

from __future__ import annotations

import threading
import time

import pytest

from streaming.util.at_once import map_at_once, run_as_they_come


def test_results_keep_the_items_order_while_the_calls_overlap() -> None:
    started: list[float] = []

    def call(item: int) -> int:
        started.append(time.monotonic())
        time.sleep(0.3 if item == 0 else 0.0)
        return item * 10

    assert map_at_once(call, list(range(6)), 8) == [0, 10, 20, 30, 40, 50]
    assert max(started) - min(started) < 0.3  # the others did not wait for item 0


def test_in_flight_is_bounded() -> None:
    spans: list[tuple[float, float]] = []

    def call(item: int) -> int:
        start = time.monotonic()
        time.sleep(0.05)
        spans.append((start, time.monotonic()))
        return item

    assert map_at_once(call, list(range(12)), 3) == list(range(12))
    # The most calls running at any call's start.
    assert max(sum(1 for s, e in spans if s <= at < e) for at, _ in spans) == 3


def test_below_two_the_calls_run_in_the_calling_thread() -> None:
    threads = map_at_once(lambda _: threading.current_thread(), [1, 2, 3], 1)
    assert threads == [threading.current_thread()] * 3


def test_the_first_failure_in_order_is_raised_without_waiting() -> None:
    release = threading.Event()

    def call(item: int) -> int:
        if item == 1:
            raise KeyError("one")
        if item == 2:
            raise ValueError("two")
        if item == 3:
            release.wait(30)
        return item

    started = time.monotonic()
    with pytest.raises(KeyError, match="one"):
        map_at_once(call, [0, 1, 2, 3, 4], 4)
    assert time.monotonic() - started < 10
    release.set()


def test_no_thread_is_left_after_success() -> None:
    before = {t.ident for t in threading.enumerate()}
    map_at_once(lambda item: item, list(range(20)), 4, name="at-once-test")
    assert not [t for t in threading.enumerate()
                if t.ident not in before and t.name.startswith("at-once-test")]


def test_a_call_starts_while_the_next_item_is_still_being_produced() -> None:
    first_done = threading.Event()
    seen: list[int] = []

    def items():
        yield 0
        assert first_done.wait(5), "item 0's call waited for the items after it"
        yield 1

    def call(item: int) -> None:
        seen.append(item)
        if item == 0:
            first_done.set()

    run_as_they_come(call, items(), 2)
    assert sorted(seen) == [0, 1]


def test_the_first_failure_in_item_order_is_raised_and_no_thread_is_left() -> None:
    def call(item: int) -> None:
        if item in (1, 3):
            time.sleep(0.1 if item == 1 else 0.0)
            raise ValueError(f"item {item}")

    before = threading.active_count()
    with pytest.raises(ValueError, match="item 1"):
        run_as_they_come(call, iter(range(5)), 4)
    time.sleep(0.2)
    assert threading.active_count() <= before


def test_a_failure_while_producing_the_items_is_raised() -> None:
    def items():
        yield 0
        raise OSError("the next item cannot be had")

    with pytest.raises(OSError, match="cannot be had"):
        run_as_they_come(lambda item: None, items(), 2)


def test_below_two_at_once_the_calls_run_in_the_calling_thread() -> None:
    threads: list[str] = []
    run_as_they_come(lambda item: threads.append(threading.current_thread().name), range(3), 1)
    assert threads == [threading.current_thread().name] * 3
