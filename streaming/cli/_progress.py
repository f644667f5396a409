"""The progress bar of long CLI commands: on stderr when it is a terminal, off with a flag."""

from __future__ import annotations

import sys
import threading
from typing import Any


def wanted(enabled: bool) -> bool:
    """Whether a bar would show: asked for, and stderr is a terminal."""
    return enabled and sys.stderr.isatty()


class CommandBar:
    """A tqdm bar counting `unit`s, safe to update from several threads.

    Args:
        total: units expected.
        label: what is being done.
        unit: what is counted ("shard", "sample").
        enabled: False (the command's --no-progress) keeps it silent; so does an stderr that
            is not a terminal (a log file or a pipe).
    """

    def __init__(self, total: int, label: str, unit: str, enabled: bool) -> None:
        self._lock = threading.Lock()
        self._bar: Any = None
        if wanted(enabled):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit=unit, dynamic_ncols=True)

    def update(self, count: int = 1) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
