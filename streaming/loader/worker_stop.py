"""Stopping a DataLoader iterator's worker processes as soon as its iteration failed.

A torch DataLoader iterator whose loop raised stays alive as long as the traceback refers to
it, usually until the garbage collector breaks the cycle; torch's shutdown from there waits out
its full join timeout (5 s) for every worker, and the workers live on until then. Shutting
them down where the error passes costs nothing and leaves no process behind.
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
