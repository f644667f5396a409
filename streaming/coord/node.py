"""One node, one plan: leader election, publication of per-epoch arrays, shared failure.

The first local process to take the namespace's `lead` lock becomes the leader: it creates the
control segment and publishes each epoch's array (e.g. the node plan, int64 [R, W, n]) as an
immutable segment `v<version>`. Followers attach read-only, without copying. The control segment
holds one int64 `(version << 32) | epoch` that the leader writes only after the new segment is
complete, so a reader never sees a half-written plan; a failure flag any process may raise; and,
through its header, the leader's identity, so waiters notice quickly when the leader dies.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
from numpy.typing import DTypeLike

from streaming.coord.files import shm_dir
from streaming.coord.flag import FailureFlag
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.shm import SegmentMissingError, SharedArray, clean_stale_shared_memory
from streaming.coord.wait import wait_for
from streaming.errors import CoordinationError

T = TypeVar("T")

CTL_BYTES = 4096
_SLOT_BYTES = 64  # int64 slots: [0] layout magic, [1] (version << 32) | epoch
_MAGIC = 0x5344_5343_544C_0001
_KEEP = 2  # published versions kept alive, so a slow reader still finds the previous one
_EPOCH_LIMIT = 1 << 32


def _attach_live_ctl(name: str, directory: Path) -> SharedArray | None:
    """The control segment if it exists, is initialised, and its leader is alive."""
    try:
        ctl = SharedArray.attach(name, (CTL_BYTES,), np.uint8, writable=True, directory=directory)
    except SegmentMissingError:
        return None
    if ctl.array[:8].view(np.int64)[0] != _MAGIC or not ctl.owner_alive():
        ctl.close()  # not ready yet, or the leftover of a dead leader
        return None
    return ctl


class NodeCoordinator:
    """A process's handle on its node's shared state for one namespace. Use `join`."""

    def __init__(
        self, ns: Namespace, ctl: SharedArray, lead: FileLock | None, timeout: float,
        directory: Path,
    ) -> None:
        self.ns = ns
        self.timeout = timeout
        self._dir = directory
        self._ctl = ctl
        self._lead = lead
        self._pid = os.getpid()
        self._slots = ctl.array[:_SLOT_BYTES].view(np.int64)
        self.flag = FailureFlag(ctl.array[_SLOT_BYTES:], FileLock(directory / ns.name("flag")))
        self._published: deque[SharedArray] = deque()
        self._version = 0
        self._reading: tuple[int, SharedArray] | None = None
        self._epoch = -1  # the epoch this process runs, for failures it reports

    @classmethod
    def join(
        cls, ns: Namespace, *, lead: bool = True, timeout: float = 120.0,
        directory: Path | None = None,
    ) -> NodeCoordinator:
        """Become the node's leader if none is running (and `lead`), else follow it.

        Removes dead owners' leftovers first. Waits at most `timeout` seconds for a leader.
        """
        directory = directory or shm_dir()
        clean_stale_shared_memory(directory)
        lock = FileLock(directory / ns.name("lead"))

        def attempt() -> NodeCoordinator | None:
            if lead and lock.try_acquire():
                try:
                    ctl = SharedArray.create(ns.name("ctl"), CTL_BYTES, np.uint8,
                                             directory=directory)
                except BaseException:
                    lock.release()
                    raise
                ctl.array[:8].view(np.int64)[0] = _MAGIC
                return cls(ns, ctl, lock, timeout, directory)
            ctl = _attach_live_ctl(ns.name("ctl"), directory)
            return None if ctl is None else cls(ns, ctl, None, timeout, directory)

        return wait_for(attempt, what=f"a node leader for {ns}", timeout=timeout)

    @property
    def is_leader(self) -> bool:
        """Whether this process computes and publishes for the node (a fork of it does not)."""
        return self._lead is not None and os.getpid() == self._pid

    @property
    def leader(self) -> str:
        """The leader process, for messages."""
        return str(self._ctl.owner)

    def published(self) -> tuple[int, int]:
        """(version, epoch) of the latest publication; version 0 means nothing yet."""
        packed = int(self._slots[1])
        return packed >> 32, packed & (_EPOCH_LIMIT - 1)

    @contextlib.contextmanager
    def publishing(self, epoch: int, shape: Sequence[int] | int, dtype: DTypeLike
                   ) -> Iterator[np.ndarray]:
        """Leader only: yield a fresh shared array to fill; it becomes epoch `epoch`'s on exit.

        Readers see it only after the block ends without an exception (no copy is made).
        """
        if not self.is_leader:
            raise CoordinationError(f"only the node leader ({self.leader}) publishes for {self.ns}")
        if not 0 <= epoch < _EPOCH_LIMIT:
            raise CoordinationError(f"epoch must be in [0, 2**32), got {epoch}")
        self.check()
        version = self._version + 1
        seg = SharedArray.create(self.ns.name(f"v{version}"), shape, dtype, directory=self._dir)
        try:
            yield seg.array
        except BaseException:
            seg.close()
            raise
        self._version = version
        self._slots[1] = (version << 32) | epoch
        self._published.append(seg)
        while len(self._published) > _KEEP:
            self._published.popleft().close()

    def publish(self, epoch: int, array: np.ndarray) -> None:
        """Leader only: publish a copy of `array` as epoch `epoch`'s, replacing the previous."""
        array = np.asarray(array)
        with self.publishing(epoch, array.shape, array.dtype) as out:
            out[...] = array

    def read(self, epoch: int, *, timeout: float | None = None) -> np.ndarray:
        """Wait for epoch `epoch`'s array and return a read-only zero-copy view of it.

        Raises CoordinationError if the leader dies, another process fails, or the leader has
        already moved past `epoch`; DeadlineExceeded after `timeout` seconds.
        """

        def ready() -> np.ndarray | None:
            version, current = self.published()
            if version == 0 or current < epoch:
                return None
            if current > epoch:
                raise CoordinationError(
                    f"{self.ns}: epoch {epoch}'s array was replaced by epoch {current}'s "
                    f"before this process read it"
                )
            if self._reading is None or self._reading[0] != version:
                try:
                    seg = SharedArray.attach(self.ns.name(f"v{version}"), directory=self._dir)
                except SegmentMissingError:
                    return None  # superseded meanwhile; look at the counter again
                self._reading = (version, seg)
            return self._reading[1].array

        return self.wait(ready, what=f"epoch {epoch}'s array from the node leader ({self.ns})",
                         timeout=timeout)

    def wait(self, predicate: Callable[[], T | None], *, what: str,
             timeout: float | None = None) -> T:
        """`wait_for` that also stops on the node's failure flag and on the leader's death."""
        return wait_for(predicate, what=what, timeout=self.timeout if timeout is None else timeout,
                        flag=self.flag, alive=self._leader_death)

    def _leader_death(self) -> str | None:
        if self.is_leader or self._ctl.owner_alive():
            return None
        return f"the node leader ({self.leader}) of {self.ns} died"

    def reason(self) -> str | None:
        """The reason of a failure any process of the node raised, if any (so the node is a
        `wait.Flag` that pickles into a new process as that process's own attachment)."""
        return self.flag.reason()

    def error(self, context: str = "") -> Exception | None:
        """The node failure as an exception of its cause's class, if any (see `FailureFlag`)."""
        return self.flag.error(context)

    def fail(self, reason: str, *, kind: str = "") -> None:
        """Raise the node's failure flag so every waiting process stops with `reason` (as an
        error of class `kind`), marked with the epoch last passed to `check`."""
        self.flag.set(reason, kind=kind, epoch=self._epoch)

    def fail_with(self, exc: BaseException, where: str = "") -> None:
        """`fail` with `exc`'s class and message, prefixed by `where`."""
        prefix = f"{where}: " if where else ""
        self.fail(f"{prefix}{type(exc).__name__}: {exc}", kind=type(exc).__name__)

    def check(self, epoch: int | None = None) -> None:
        """Raise the root cause's error if any process of the node has failed. With `epoch`
        (the one this process starts), a failure of an earlier epoch is forgotten first."""
        if epoch is not None:
            self._epoch = epoch
            self.flag.clear_before(epoch)
        self.flag.raise_if_set(str(self.ns))

    @contextlib.contextmanager
    def failing_on_error(self) -> Iterator[None]:
        """Raise the failure flag with the description of any exception escaping the block."""
        try:
            yield
        except BaseException as exc:
            self.fail_with(exc)
            raise

    def close(self) -> None:
        """Let go of everything; the leader also removes the node's segments."""
        if self._reading is not None:
            self._reading[1].close()
            self._reading = None
        while self._published:
            self._published.popleft().close()
        self._ctl.close()
        if self._lead is not None:
            self._lead.release()

    def __enter__(self) -> NodeCoordinator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Callable[..., NodeCoordinator], tuple[object, ...]]:
        # A DataLoader worker receiving this handle follows the same node state.
        return _follow, (self.ns, self.timeout, self._dir)


def _follow(ns: Namespace, timeout: float, directory: Path) -> NodeCoordinator:
    return NodeCoordinator.join(ns, lead=False, timeout=timeout, directory=directory)
