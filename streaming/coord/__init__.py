"""Node-local coordination: job-scoped shared memory, locks, failure flag and bounded waits.

`NodeCoordinator.join(Namespace.for_job(local_dirs))` is the entry point: one process per node
leads and publishes each epoch's plan; every other process reads it without copying.
"""

from streaming.coord.flag import FailureFlag
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace, job_identity
from streaming.coord.node import NodeCoordinator
from streaming.coord.proc import ProcessId
from streaming.coord.shm import SegmentMissingError, SharedArray, clean_stale_shared_memory
from streaming.coord.wait import Deadline, wait_for

__all__ = [
    "Deadline",
    "FailureFlag",
    "FileLock",
    "Namespace",
    "NodeCoordinator",
    "ProcessId",
    "SegmentMissingError",
    "SharedArray",
    "clean_stale_shared_memory",
    "job_identity",
    "wait_for",
]
