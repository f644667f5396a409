"""Fresh processes that start in a fraction of a second: forks of a multiprocessing fork server
that imported torch and streaming once.

A child of the fork server inherits nothing from the test process (no cache tables, locks or
threads), as a spawned interpreter would, without paying torch's import again. Unlike a spawned
one it leaves through os._exit after its target, as a fork does."""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext

PRELOAD = ["torch", "streaming.dataset.streaming_dataset"]


def fresh_context() -> BaseContext:
    """The fork-server context; the server (started on first use, then kept for the session)
    imports PRELOAD once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx
