"""What a folder holds on disk, as a user's `du` sees it: now (`cache_bytes`) and at its largest
while a block runs (`peak_size`)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def peak_size(folder: Path, every: float = 0.002) -> Iterator[list[int]]:
    """Watch `cache_bytes(folder)` from a thread every `every` s; yields [largest seen]."""
    peak, stop = [0], threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):  # not made yet: nothing held
                peak[0] = max(peak[0], cache_bytes(folder))
            time.sleep(every)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield peak
    finally:
        stop.set()
        poller.join()


def cache_bytes(folder: Path) -> int:
    """What a user's `du` of the cache folder sees: the sum of the sizes of its files."""
    total = 0
    for entry in os.scandir(folder):
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            pass
    return total
