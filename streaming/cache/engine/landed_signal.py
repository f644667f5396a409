"""A process's own signal that one of its prefetch threads finished a shard, so that a reader
of the same process waiting for it wakes at once instead of at its next poll of the node
table (shards other processes bring are still found by polling)."""

from __future__ import annotations

import threading


class Landings:
    """A count of the shards this process's prefetchers finished (brought or failed), that
    waiting readers can sleep on."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0

    def seen(self) -> int:
        """The count now; pass it to `wait` after checking the table."""
        return self._count

    def announce(self) -> None:
        """A prefetcher finished a shard: wake every reader waiting in `wait`."""
        with self._changed:
            self._count += 1
            self._changed.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        """Sleep until a shard lands after `seen` was read, or for `timeout` seconds.

        Args:
            seen: `seen()` as read before the caller last looked at the table.
            timeout: the longest sleep (the caller's next poll).
        """
        with self._changed:
            self._changed.wait_for(lambda: self._count != seen, timeout)
