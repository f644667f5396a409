"""Process identity that survives pid reuse: (pid, kernel start time, pid namespace).

A bare pid is not enough to decide that the owner of a shared segment is dead: pids are recycled,
and a killed child stays a zombie until reaped. Linux's /proc gives the start time and state;
elsewhere we fall back to `kill(pid, 0)`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from the state onwards (the command name may contain spaces)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def _start_time(pid: int) -> int:
    """Kernel start time of `pid` in clock ticks since boot, or 0 when unknown."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else 0


def _pid_namespace() -> int:
    """Inode of this process's pid namespace (0 when unknown): pids only compare within one."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def parent_pid(pid: int) -> int:
    """The parent of process `pid`; 0 when it is gone, a zombie, or /proc cannot tell.

    Args:
        pid: a process id.
    """
    fields = _stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 and fields[0] not in ("Z", "X") else 0


@functools.lru_cache(maxsize=1)
def _identity(pid: int) -> tuple[int, int]:
    """(start time, pid namespace) of this process, whose pid is `pid`: read from /proc once
    (a forked child, with a pid of its own, reads it again)."""
    return _start_time(pid), _pid_namespace()


@dataclass(frozen=True)
class ProcessId:
    """A process as seen by the kernel; `start` and `pidns` are 0 where the OS cannot tell."""

    pid: int
    start: int = 0
    pidns: int = 0

    @classmethod
    def current(cls) -> ProcessId:
        """The calling process."""
        pid = os.getpid()
        return cls(pid, *_identity(pid))

    def alive(self) -> bool:
        """Whether this very process still runs (a zombie or a recycled pid counts as dead).

        A process in another pid namespace cannot be judged from here, so it counts as alive:
        callers must never reclaim what they cannot prove dead.
        """
        if self.pid <= 0:
            return False
        if self.pidns and self.pidns != _pid_namespace():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, owned by someone else
        fields = _stat_fields(self.pid)
        if fields is None:
            return True  # no /proc: kill(0) is all we have
        if fields[0] in ("Z", "X"):
            return False
        return not self.start or len(fields) <= 19 or int(fields[19]) == self.start

    def __str__(self) -> str:
        return f"pid {self.pid}"
