"""One node, one leader, one shared failure.

The first local process to take the namespace's `lead` lock becomes the leader: it creates the
control segment, which holds a failure flag any process may raise and, through its header, the
leader's identity, so waiters notice quickly when the leader dies. Node plans are published by
`coord.plans.PlanBoard`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np

from streaming.coord.flag import FailureFlag
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace
from streaming.coord.shm import SegmentMissingError, SharedArray, clean_stale_shared_memory
from streaming.coord.shm_files import shm_dir
from streaming.coord.wait import wait_for

T = TypeVar("T")

CTL_BYTES = 4096
_SLOT_BYTES = 64  # int64 slots: [0] layout magic
_MAGIC = 0x5344_5343_544C_0001


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
        self.flag = FailureFlag(ctl.array[_SLOT_BYTES:], FileLock(directory / ns.name("flag")))
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
