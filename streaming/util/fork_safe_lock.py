"""A lock that a forked child finds free.

A process forked while another of its threads held a `threading.Lock` (a DataLoader worker
started while a prefetching thread of the training process took a connection from a pool, say)
inherits the lock held, by a thread that does not exist in the child: the child's first
`acquire` waits forever. Python re-creates its own module locks in a child (logging's, the
import lock), not ours. A `ForkSafeLock` is replaced by a new, free lock in every child forked
after it was made, so what it guards is the child's to use, and the child decides (as the
owners of these locks do) what of the parent's state it keeps.
"""

from __future__ import annotations

import os
import threading
import weakref


class ForkSafeLock:
    """A mutual-exclusion lock for `with` blocks, free again in every forked child."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        _live.add(self)

    def __enter__(self) -> ForkSafeLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def locked(self) -> bool:
        """Whether some thread of this process holds the lock."""
        return self._lock.locked()

    def renew(self) -> None:
        """Replace the lock with a free one (in a forked child, where no other thread runs)."""
        self._lock = threading.Lock()


_live: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()


def _renew_all() -> None:
    for lock in list(_live):
        lock.renew()


os.register_at_fork(after_in_child=_renew_all)
