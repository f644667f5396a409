"""Iterations still open when the interpreter exits are closed by an atexit hook, while every
module their clean-up uses is still loaded. Left to the garbage collector, a suspended
generator's `finally` runs during interpreter teardown, against half-cleared modules, and
prints an "Exception ignored" traceback instead of ending the pass (stopping its prefetchers,
withdrawing its horizon from the node's cache)."""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Generator
from typing import Any, TypeVar

from streaming.util.fork_safe_lock import ForkSafeLock

log = logging.getLogger(__name__)

G = TypeVar("G", bound=Generator[Any, Any, Any])

_open: weakref.WeakSet[Generator[Any, Any, Any]] = weakref.WeakSet()
_lock = ForkSafeLock()
_hooked = [False]


def closed_at_exit(generator: G) -> G:
    """`generator`, closed at interpreter exit if it is still open then (as a loop that
    breaks out of it would leave it to be closed).

    Args:
        generator: a generator whose `finally` releases what the iteration holds.
    """
    with _lock:
        if not _hooked[0]:
            atexit.register(close_open)
            _hooked[0] = True
        _open.add(generator)
    return generator


def close_open() -> None:
    """Close every tracked generator still open (the atexit hook). One running in another
    thread cannot be closed from here and is left as it is."""
    with _lock:
        generators = list(_open)
        _open.clear()
    for generator in generators:
        try:
            generator.close()
        except Exception as exc:  # running in another thread, or its clean-up failed
            log.debug("closing %r at exit: %r", generator, exc)
