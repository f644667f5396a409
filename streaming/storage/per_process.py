"""Objects kept once per process and key: SDK clients and their connection pools are
thread-safe but not fork-safe, so a forked child (a DataLoader worker) forgets what its parent
made and builds its own on first use."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from streaming.util.fork_safe_lock import ForkSafeLock

V = TypeVar("V")


class PerProcess(Generic[V]):
    """`get(key, make)`: this process's object for `key`, made by `make()` on first use (under
    the cache's lock, so two threads never make the same one)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._items: dict[Hashable, V] = {}
        self._lock = ForkSafeLock()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        with self._lock:
            if self.pid != os.getpid():  # forked: the parent's connections are not ours
                self._items.clear()
                self.pid = os.getpid()
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = make()
        return item

    def __len__(self) -> int:
        return len(self._items)
