"""The node-wide slow-down: one small state file per store (scheme and bucket) in the node's
shared-memory directory, read and written under an flock by every process of the node.

When the store answers "slow down" (429, 503, a reset connection), every process of the node
stops sending for a pause (the store's `Retry-After`, else a pause that doubles with each wave of
refusals) and at most `limit` requests are in flight node-wide, a limit that halves with each
wave. Once the store has been quiet for `CALM` seconds, successes raise the limit one step at a
time until it is lifted altogether. Outside a slow-down a request only reads the state file.

In-flight requests hold an flock on one of `limit` slot files, so a process that dies frees its
slot with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from streaming.coord.shm_files import shm_dir, try_flock
from streaming.errors import DownloadTimeoutError

START_LIMIT = 4  # requests in flight node-wide at the first refusal
MAX_LIMIT = 32  # a limit raised past this is lifted
CALM = 1.0  # seconds without a refusal before the limit grows again
STEP = 0.25  # seconds between two raises of the limit
WAVE = 0.25  # refusals closer together than this are one wave (one halving)
FIRST_PAUSE = 0.5  # seconds every process waits after the first wave without Retry-After
MAX_PAUSE = 10.0
MAX_RETRY_AFTER = 60.0  # a longer Retry-After is honoured only this far
_POLL = 0.02
_STATE = struct.Struct("<ddddd")  # limit (0: none), pause_until, last_refusal, last_raise, waves


@dataclass
class GateState:
    """What the node knows about one store right now (times are time.monotonic() values)."""

    limit: int = 0
    pause_until: float = 0.0
    last_refusal: float = 0.0
    last_raise: float = 0.0
    waves: int = 0

    @property
    def calm(self) -> bool:
        return self.limit == 0 and self.waves == 0


class NodeGate:
    """The slow-down shared by every process of this node for the store `key`.

    Args:
        key: names the store (e.g. "s3://bucket"); the same key means the same gate.
        directory: where the state and slot files live (default: the shared-memory directory).
    """

    def __init__(self, key: str, directory: Path | None = None) -> None:
        digest = hashlib.blake2b(f"{os.getuid()}|{key}".encode(), digest_size=8).hexdigest()
        self.key = key
        self.path = (directory or shm_dir()) / f"streaming-gate-{digest}"

    # ----- state ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[tuple[int, GateState]]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd, self._decode(os.pread(fd, _STATE.size, 0))
        finally:
            os.close(fd)

    @staticmethod
    def _decode(raw: bytes) -> GateState:
        if len(raw) != _STATE.size:
            return GateState()
        limit, pause, refusal, raised, waves = _STATE.unpack(raw)
        return GateState(int(limit), pause, refusal, raised, int(waves))

    @staticmethod
    def _store(fd: int, state: GateState) -> None:
        os.pwrite(fd, _STATE.pack(state.limit, state.pause_until, state.last_refusal,
                                  state.last_raise, state.waves), 0)

    def state(self) -> GateState:
        """The current state (read without the lock: a torn read only delays a decision)."""
        try:
            with open(self.path, "rb") as f:
                return self._decode(f.read(_STATE.size))
        except FileNotFoundError:
            return GateState()

    # ----- what requests report ------------------------------------------------------------
    def refused(self, retry_after: float | None) -> float:
        """The store refused a request (overload): slow the node down; return the node's pause
        in seconds from now."""
        now = time.monotonic()
        with self._locked() as (fd, state):
            if now - state.last_refusal > WAVE:
                state.limit = max(1, (state.limit or START_LIMIT * 2) // 2)
                state.waves += 1
            if retry_after is not None:
                pause = min(max(retry_after, 0.0), MAX_RETRY_AFTER)
            else:
                pause = min(MAX_PAUSE, FIRST_PAUSE * 2 ** max(state.waves - 1, 0))
                pause = random.uniform(pause / 2, pause)
            state.pause_until = max(state.pause_until, now + pause)
            state.last_refusal = now
            self._store(fd, state)
            return state.pause_until - now

    def succeeded(self) -> None:
        """A request went through: after a calm spell, let one more request in at a time."""
        seen = self.state()
        now = time.monotonic()
        if seen.calm or now - seen.last_refusal < CALM or now - seen.last_raise < STEP:
            return
        with self._locked() as (fd, state):
            if now - state.last_refusal < CALM or now - state.last_raise < STEP:
                return
            state.waves = 0
            state.limit = 0 if state.limit + 1 > MAX_LIMIT else state.limit + 1
            state.last_raise = now
            self._store(fd, state)

    # ----- what requests wait for ----------------------------------------------------------
    @contextlib.contextmanager
    def permit(self, deadline: float, what: str) -> Iterator[None]:
        """Wait for the node's pause to end and for a free request slot, then hold the slot for
        the block; DownloadTimeoutError naming `what` if `deadline` (monotonic) comes first."""
        fd = None
        while True:
            state = self.state()
            now = time.monotonic()
            if now >= state.pause_until and (
                    state.limit == 0 or (fd := self._take_slot(state.limit)) is not None):
                break
            if now >= deadline:
                raise DownloadTimeoutError(
                    f"{what}: the store kept refusing requests (429/503/resets) and its "
                    f"node-wide slow-down outlasted the download deadline")
            wait = state.pause_until - now if now < state.pause_until else _POLL
            time.sleep(max(min(wait, deadline - now), 0.0) + random.uniform(0, _POLL))
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)

    def _take_slot(self, limit: int) -> int | None:
        for k in random.sample(range(limit), limit):
            path = self.path.with_name(f"{self.path.name}.{k}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            if try_flock(fd):
                return fd
            os.close(fd)
        return None


def gate_for(url: str) -> NodeGate | None:
    """The node gate of the store holding `url` (scheme and bucket or host); None for local
    paths, which never throttle."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() == "file":
        return None
    return NodeGate(f"{scheme.lower()}://{rest.split('/', 1)[0]}")
