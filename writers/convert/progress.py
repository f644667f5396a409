"""A tqdm bar over input units (bytes, rows or records) that also shows samples written."""

from __future__ import annotations

import time
from typing import Any


class Progress:
    """Progress of one conversion; silent when `enabled` is False."""

    def __init__(self, total: int | None, unit: str, label: str, enabled: bool) -> None:
        self.samples = 0
        self._bar: Any = None
        self._last = 0.0
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total or None, unit=unit, unit_scale=True,
                             unit_divisor=1024 if unit == "B" else 1000,
                             desc=f"convert {label}", dynamic_ncols=True)

    def update(self, units: int, samples: int) -> None:
        self.samples += samples
        if self._bar is None:
            return
        if units:
            self._bar.update(units)
        now = time.monotonic()
        if now - self._last > 0.5:
            self._bar.set_postfix(samples=self.samples, refresh=False)
            self._last = now

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix(samples=self.samples, refresh=False)
            self._bar.close()
