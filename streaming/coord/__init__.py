"""Node-local coordination: job-scoped shared memory, locks, failure flag and bounded waits.

`NodeCoordinator.join(Namespace.for_job(local_dirs))` is the entry point: one process per node
leads, and a failure any process raises stops every wait of the node. `PlanBoard` publishes node
plans: the first process to ask computes each one, the others copy their row.
"""

from streaming.coord.flag import FailureFlag
from streaming.coord.lock import FileLock
from streaming.coord.names import Namespace, job_identity
from streaming.coord.node import NodeCoordinator
from streaming.coord.plans import PlanBoard
from streaming.coord.proc import ProcessId
from streaming.coord.shm import SegmentMissingError, SharedArray, clean_stale_shared_memory
from streaming.coord.wait import Deadline, wait_for

__all__ = [
    "Deadline",
    "FailureFlag",
    "FileLock",
    "Namespace",
    "NodeCoordinator",
    "PlanBoard",
    "ProcessId",
    "SegmentMissingError",
    "SharedArray",
    "clean_stale_shared_memory",
    "job_identity",
    "wait_for",
]
