"""Job namespaces: short, deterministic names for a node's shared segments.

A namespace is a hash of (user id, sorted absolute local dirs, job identity, salt, instance
ordinal). Every local rank of one node of one job derives the same namespace without talking to
the others; two jobs, two nodes simulated on one host, two datasets in one process or two test
workers get different ones.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streaming.coord.shm_files import PREFIX
from streaming.errors import ArgumentError
from streaming.util.fork_safe_lock import ForkSafeLock

TOKEN_CHARS = 12
MAX_SUFFIX = 14  # keeps every name within the 31 characters macOS allows for POSIX shm

# Launcher variables that identify one run of one job, in a fixed order.
_JOB_VARS = (
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "PYTEST_XDIST_WORKER",
)
# The variables that alone prove a launcher is present (others only refine the identity).
_LAUNCHER_VARS = ("TORCHELASTIC_RUN_ID", "MASTER_PORT", "SLURM_JOB_ID")

_instances: Counter[str] = Counter()
_instances_lock = ForkSafeLock()


def node_rank(env: Mapping[str, str]) -> str | None:
    """This node's index in the job, from whichever launcher convention is present."""
    for var in ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"):
        if env.get(var):
            return env[var]
    rank, local = env.get("RANK"), env.get("LOCAL_WORLD_SIZE")
    if rank and local and rank.isdigit() and local.isdigit() and int(local) > 0:
        return str(int(rank) // int(local))
    return None


def job_identity(env: Mapping[str, str] | None = None) -> str | None:
    """A string naming this job run and node, or None when no launcher is detected."""
    env = os.environ if env is None else env
    if not any(env.get(var) for var in _LAUNCHER_VARS):
        return None
    parts = [f"{var}={env.get(var, '')}" for var in _JOB_VARS]
    parts.append(f"node={node_rank(env)}")
    return ";".join(parts)


@dataclass(frozen=True)
class Namespace:
    """A job-scoped prefix for shared segments and lock files (picklable, cheap)."""

    token: str

    def name(self, suffix: str) -> str:
        """The full segment name for `suffix` (e.g. 'ctl', 'v3'), at most 31 characters."""
        if not suffix or len(suffix) > MAX_SUFFIX:
            raise ArgumentError(f"namespace suffix {suffix!r} must be 1-{MAX_SUFFIX} characters")
        return f"{PREFIX}{self.token}_{suffix}"

    @classmethod
    def for_job(
        cls,
        local_dirs: Sequence[str | os.PathLike[str]],
        *,
        salt: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Namespace:
        """The namespace of one dataset instance on this node of this job.

        With a launcher, it is deterministic across the node's local ranks: the k-th dataset a
        process opens on the same `local_dirs` gets the k-th namespace, as long as every rank
        builds its datasets in the same order (true of SPMD training scripts). Without one,
        each call gets a fresh random namespace. `salt` separates datasets that should never
        share a plan (pass a fingerprint of the dataset configuration).
        """
        job = job_identity(env)
        if job is None:
            return cls.derive(local_dirs, job=None, salt=salt, instance=secrets.token_hex(8))
        key = cls._key(local_dirs, job, salt)
        with _instances_lock:
            _instances[key] += 1
            instance = _instances[key]
        return cls.derive(local_dirs, job=job, salt=salt, instance=str(instance))

    @classmethod
    def derive(
        cls, local_dirs: Sequence[str | os.PathLike[str]], *, job: str | None, salt: str,
        instance: str,
    ) -> Namespace:
        """The pure part of `for_job`: the namespace of an explicit (dirs, job, salt, instance)."""
        key = f"{cls._key(local_dirs, job, salt)}\0{instance}"
        return cls(hashlib.blake2b(key.encode(), digest_size=TOKEN_CHARS // 2).hexdigest())

    @staticmethod
    def _key(local_dirs: Sequence[str | os.PathLike[str]], job: str | None, salt: str) -> str:
        dirs = sorted({os.path.abspath(os.fspath(d)) for d in local_dirs})
        return "\0".join([str(os.getuid()), *dirs, salt, job or ""])

    def __str__(self) -> str:
        return f"{PREFIX}{self.token}"
