"""A progress bar over bytes that have really moved (uploads), silent when disabled."""

from __future__ import annotations

import threading
from typing import Any


class ByteBar:
    """Counts bytes as each transfer completes, so its rate is what the network achieved.

    Args:
        total: bytes expected in all.
        label: what is moving, e.g. "upload to s3://bucket/corpus".
        enabled: False: count silently.
    """

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.done = 0
        self._lock = threading.Lock()
        self._bar: Any = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                             desc=label, dynamic_ncols=True)

    def add(self, count: int) -> None:
        """`count` more bytes arrived (safe from several threads)."""
        with self._lock:
            self.done += count
            if self._bar is not None:
                self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
