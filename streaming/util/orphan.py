"""A DataLoader worker whose training process died stops at once: a daemon thread notices the
parent is gone (the worker is re-parented) within `CHECK_EVERY` seconds and ends the process, so
no download or decompression keeps running for nobody. torch's own check only runs between
samples, and a worker waiting for a shard can be inside one sample for minutes. Temporary files
it leaves are removed at the next start (`streaming.cache.folder.disk_files.sweep_orphans`)."""

from __future__ import annotations

import logging
import os
import threading

CHECK_EVERY = 0.25  # seconds between looks at the parent pid
EXIT_CODE = 70  # what an orphaned worker exits with (EX_SOFTWARE)

_watched_pid: int | None = None


def watch_parent() -> None:
    """Start the watch in this process (once per process; call it in the worker)."""
    global _watched_pid
    if _watched_pid == os.getpid():
        return
    _watched_pid = os.getpid()
    parent = os.getppid()
    threading.Thread(target=_watch, args=(parent,), daemon=True,
                     name="streaming-parent-watch").start()


def _watch(parent: int) -> None:
    stop = threading.Event()
    while not stop.wait(CHECK_EVERY):
        if os.getppid() != parent:
            logging.getLogger("streaming").warning(
                "DataLoader worker %d: its training process %d is gone; stopping", os.getpid(),
                parent)
            os._exit(EXIT_CODE)
