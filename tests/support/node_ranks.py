"""Rank processes of one node of one job, started as a launcher starts them: each with RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and the job's MASTER_ADDR/MASTER_PORT, and none of the
test process's own launcher variables."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_PORT", "MASTER_ADDR",
            "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")


def run_node_ranks(args: Sequence[str], ranks: int, env: Mapping[str, str] | None = None,
                   timeout: float = 180.0) -> list[str]:
    """Run `python *args` as `ranks` rank processes of one node at once (from the repository,
    with `env` or this process's environment); their stripped outputs, in rank order, once
    every one has exited 0.

    Args:
        args: the interpreter's arguments (`-c`, a script, its arguments).
        ranks: rank processes of the node.
        env: their environment before the launcher variables (default: this process's).
        timeout: seconds each may take.
    """
    base = {k: v for k, v in (os.environ if env is None else env).items() if k not in LAUNCHER}
    port = str(free_port())
    procs = []
    for rank in range(ranks):
        launcher = {"RANK": str(rank), "WORLD_SIZE": str(ranks), "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(ranks), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port, "PYTHONPATH": str(ROOT)}
        procs.append(subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                      env={**base, **launcher}))
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, stderr[-2000:]
        out.append(stdout.strip())
    return out
