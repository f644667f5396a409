"""One node per cache folder: a `local` folder on a network file system that two nodes use at
once is refused at start-up instead of failing later.

The processes of one node coordinate a cache folder through shared memory, which another
machine cannot see: its ranks would evict shards this node is reading, and the folder would
outgrow `cache_limit`. So every process that uses a cache folder holds a shared lock on
`.streaming-node.lock` for as long as it lives, and the folder records, in
`.streaming-node.json`, the node that took it. A process that finds the lock held (a live
user) by another node refuses the folder with CacheFolderError. Another node is another node
rank of the same job (as launchers number them), or another machine (host name and boot).
Jobs on one machine share a folder through shared memory, so they may share it. The kernel
drops the lock when its holder dies, and network file systems that support locking (NFSv4,
NFSv3 with lockd) pass it to the server, so a folder whose users are gone is free again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from streaming.cache.folder.file_names import NODE_FILE, NODE_LOCK
from streaming.coord.names import job_identity, node_rank
from streaming.errors import CacheFolderError
from streaming.util.atomic import staged_file
from streaming.util.confine import confine, open_inside, read_regular
from streaming.util.fork_safe_lock import ForkSafeLock

_held: dict[str, int] = {}  # folder -> descriptor holding this process's shared lock
_held_lock = ForkSafeLock()


@dataclass(frozen=True)
class NodeRecord:
    """Who uses a cache folder: the machine, and the job and node rank when a launcher runs.

    Args:
        host: host name.
        boot: the machine's boot id (a host name may be reused by another machine).
        job: the job run (launcher variables), None without a launcher.
        node: the node rank within the job, None without a launcher.
    """

    host: str
    boot: str
    job: str | None
    node: str | None

    @classmethod
    def current(cls) -> NodeRecord:
        """This process's node."""
        job = job_identity()
        boot = ""
        with contextlib.suppress(OSError):
            boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        run = None if job is None else job.rpartition(";node=")[0]
        return cls(socket.gethostname(), boot, run, node_rank(os.environ) if job else None)

    @classmethod
    def read(cls, folder: Path) -> NodeRecord | None:
        """The folder's record, None when it has none (or an unreadable one)."""
        try:
            return cls(**json.loads(read_regular(folder / NODE_FILE)))
        except (OSError, ValueError, TypeError):
            return None

    def write(self, folder: Path) -> None:
        with staged_file(confine(folder, folder / NODE_FILE)) as tmp:
            tmp.write_text(json.dumps(asdict(self)))

    def other_node(self, other: NodeRecord) -> bool:
        """Whether `other` is another node than this one (see the module's notes)."""
        if (self.host, self.boot) != (other.host, other.boot):
            return True
        return self.job is not None and self.job == other.job and self.node != other.node

    def describe(self) -> str:
        where = f"host {self.host}"
        return f"node {self.node} of job [{self.job}] on {where}" if self.job else where


def claim_folder(folder: Path) -> None:
    """Hold cache `folder` for this node for the rest of this process, or until the folder
    is removed (callers hold the folder's origin lock, so claims do not race).

    Args:
        folder: the cache folder.

    Raises:
        CacheFolderError: a live process of another node uses the folder.
    """
    key = str(folder)
    with _held_lock:
        if key in _held:
            return
        for gone in [k for k in _held if not os.path.isdir(k)]:  # folders removed since
            os.close(_held.pop(gone))
        mine = NodeRecord.current()
        fd = open_inside(folder, folder / NODE_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            _take(folder, fd, mine)
        except BaseException:
            os.close(fd)
            raise
        _held[key] = fd


def _take(folder: Path, fd: int, mine: NodeRecord) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        seen = NodeRecord.read(folder)
        if seen is not None and mine.other_node(seen):
            raise CacheFolderError(
                f"local folder {folder} is in use by {seen.describe()}, and this process is "
                f"{mine.describe()}: two nodes cannot share one cache folder (each node "
                "coordinates its cache in its own shared memory, so one would evict shards the "
                "other reads and the folder would outgrow cache_limit). Give each node its own "
                "`local` (a node-local disk, or a folder per node rank), or wait until the "
                "other node's job has ended") from None
        fcntl.flock(fd, fcntl.LOCK_SH)  # users of this node: share it
        return
    if NodeRecord.read(folder) != mine:
        mine.write(folder)
    fcntl.flock(fd, fcntl.LOCK_SH)
