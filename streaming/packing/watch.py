"""The metrics of a PackedStreamingDataset iterated directly in this process: each batch of packs
is a step, and the packs' fill comes from the pack plan."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from streaming.observe.metrics import Meter
from streaming.packing.pack_stats import PackCounts, PackFill


class PackWatch:
    """Steps, packs, the time the loop waited for them and the fill of the packs it took.

    Args:
        packing_length: the token budget of one pack.
    """

    def __init__(self, packing_length: int) -> None:
        self.meter = Meter()
        self.packs = PackCounts(packing_length)

    def begin(self, fill: Callable[[int], PackFill]) -> None:
        """An iteration whose first `n` packs fill `fill(n)` starts."""
        self.meter.start()
        self.packs.begin(fill, self.meter.samples)

    def timed(self, batches: Iterator[dict[str, Any]], packs_done: Callable[[], int]
              ) -> Iterator[dict[str, Any]]:
        """`batches`, with the time until each arrives recorded as a step of the packs it
        added to `packs_done()`."""
        try:
            while True:
                before = packs_done()
                asked = time.perf_counter_ns()
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                now = time.perf_counter_ns()
                self.meter.step(now - asked, packs_done() - before, now)
                yield batch
        finally:
            self.packs.fold(self.meter.samples)

    def metrics(self) -> dict[str, float]:
        """The meter's figures and the `packing/...` fill of the packs taken so far."""
        out = self.meter.as_dict()
        out.update(self.packs.as_dict(self.meter.samples))
        return out
