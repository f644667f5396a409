"""SLURM- and MPI-style jobs simulated with real processes: ranks on simulated nodes (SLURM: 2
nodes of 2, Open MPI: 2 nodes of 1, PMI: 1 node of 2) find their place from the launcher's
variables alone and read disjoint samples that cover the epoch. The rank processes are forked
from one process that imported the library without any launcher variable (env_rank.py), so
the job pays for one import of torch, not one per rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.datasets import write_ids

SAMPLES = 120
TIMEOUT = 120
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
                  "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def slurm_env(rank: int, nodes: int, per_node: int) -> dict[str, str]:
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": str(nodes * per_node), "SLURM_STEP_NUM_TASKS": str(nodes * per_node),
            "SLURM_LOCALID": str(rank % per_node),
            "SLURM_NODEID": str(rank // per_node), "SLURM_NNODES": str(nodes),
            "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})"}


def openmpi_env(rank: int, nodes: int, per_node: int) -> dict[str, str]:
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(nodes * per_node),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % per_node),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node)}


def pmi_env(rank: int, nodes: int, per_node: int) -> dict[str, str]:
    return {"PMI_RANK": str(rank), "PMI_SIZE": str(nodes * per_node),
            "MPI_LOCALRANKID": str(rank % per_node), "MPI_LOCALNRANKS": str(per_node)}


@pytest.mark.slow
@pytest.mark.parametrize(("make_env", "nodes", "per_node"),
                         [(slurm_env, 2, 2), (openmpi_env, 2, 1), (pmi_env, 1, 2)],
                         ids=["slurm", "openmpi", "pmi"])
def test_ranks_from_launcher_variables_read_disjoint_covering_samples(
        tmp_path, make_env, nodes: int, per_node: int) -> None:
    data = write_ids(tmp_path / "src", SAMPLES)
    base = {k: v for k, v in os.environ.items()
            if k not in _LAUNCHER_VARS and not k.startswith(("SLURM_", "OMPI_", "PMI_"))}
    envs = [make_env(rank, nodes, per_node) for rank in range(nodes * per_node)]
    script = Path(__file__).with_name("env_rank.py")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(data), str(out), json.dumps(envs)],
                          env=base, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    results = [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(len(envs))]
    for rank, result in enumerate(results):
        world = result["world"]
        assert (world["num_nodes"], world["ranks_per_node"]) == (nodes, per_node)
        assert (world["node"], world["rank_in_node"]) == divmod(rank, per_node)
    seen = [result["ids"] for result in results]
    assert all(len(ids) == SAMPLES // (nodes * per_node) for ids in seen)
    assert sorted(i for ids in seen for i in ids) == list(range(SAMPLES))
