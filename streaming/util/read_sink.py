"""`ReadSink`: where a read tally also reports its counts. The read side's `ReadTally` reports to
one, and the loader's metrics (which may not import the read side) collect through one."""

from __future__ import annotations

from typing import Protocol


class ReadSink(Protocol):
    """Where a tally also reports its counts (a loader collecting its workers' reads)."""

    def add(self, bytes_read: int, rows: int) -> None:
        """Count a read of `rows` rows, `bytes_read` raw bytes."""
