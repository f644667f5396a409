"""Landings: a reader waiting for a shard its own prefetcher brings wakes when it lands."""

from __future__ import annotations

import threading
import time

from streaming.cache.engine.landed_signal import Landings


def test_a_waiting_reader_wakes_when_a_shard_lands_not_at_its_timeout():
    landings = Landings()
    seen = landings.seen()
    woke = threading.Event()

    def reader() -> None:
        landings.wait(seen, timeout=60.0)
        woke.set()

    thread = threading.Thread(target=reader)
    thread.start()
    assert not woke.wait(0.2)  # nothing landed: still asleep
    landings.announce()
    assert woke.wait(30.0)  # far under the 60 s timeout: woken by the landing
    thread.join(30.0)


def test_a_landing_between_the_check_and_the_wait_is_not_lost():
    landings = Landings()
    seen = landings.seen()  # the reader reads the count, then checks the table ...
    landings.announce()  # ... the shard lands before the reader sleeps
    began = time.monotonic()
    landings.wait(seen, timeout=60.0)
    assert time.monotonic() - began < 30.0


def test_without_a_landing_the_wait_ends_at_its_timeout():
    landings = Landings()
    began = time.monotonic()
    landings.wait(landings.seen(), timeout=0.05)
    assert time.monotonic() - began >= 0.05
