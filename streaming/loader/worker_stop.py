"""Stopping a DataLoader iterator's worker processes as soon as its iteration failed.

A torch DataLoader iterator whose loop raised stays alive as long as the traceback refers to
it, usually until the garbage collector breaks the cycle, and its workers live on until then.
Torch's shutdown from the collector cannot reach them: the collector has already run the
finalizers that close the iterator's queues, so the stop message is never sent, and each
worker is killed only after the full join timeout (5 s). Shutting them down where the error
passes costs nothing and leaves no process behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def stop_workers(it: Iterator[Any]) -> None:
    """Shut down the worker processes of `it`, a DataLoader iterator that will not be resumed
    (any other iterator is left alone). Safe to call more than once.

    Args:
        it: The iterator `DataLoader.__iter__` returned.
    """
    shutdown = getattr(it, "_shutdown_workers", None)
    if callable(shutdown):
        shutdown()
