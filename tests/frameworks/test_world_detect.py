"""Where a process finds itself: the order of sources (process group, torchrun, Lightning,
SLURM, MPI, single process), how each is read, and errors that name every source read."""

from __future__ import annotations

import pytest

from streaming.coord.world_detect import check_unchanged, detect_placement, detect_world
from streaming.errors import PlanError, WorldDetectionError
from streaming.plan import World


def place(env: dict[str, str], group: tuple[int, int] | None = None,
          hosts: list[str] | None = None) -> tuple:
    def gather() -> list[str]:
        assert hosts is not None, "asked the group for host names"
        return hosts

    p = detect_placement(env, group=group, hosts=gather)
    return p.rank, p.world_size, p.local_rank, p.local_world_size, p.node


def test_single_process_without_any_source() -> None:
    assert place({}) == (0, 1, 0, 1, 0)
    assert detect_world(env={}) == World()


def test_torchrun_variables() -> None:
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    assert place(env) == (5, 8, 1, 4, 1)
    w = detect_world(workers_per_rank=2, env=env)
    assert (w.num_nodes, w.ranks_per_node, w.node, w.rank_in_node) == (2, 4, 1, 1)
    assert (w.workers_per_rank, w.worker) == (2, 0)
    assert place({"WORLD_SIZE": "1"}) == (0, 1, 0, 1, 0)


def test_lightning_launcher_sets_no_rank() -> None:
    assert place({"NODE_RANK": "0", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}) == (1, 2, 1, 2, 0)
    env = {"NODE_RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    assert place(env) == (3, 4, 1, 2, 1)


def test_lightning_on_a_later_node_needs_ranks_per_node_or_the_group() -> None:
    env = {"NODE_RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}
    with pytest.raises(WorldDetectionError, match="LOCAL_WORLD_SIZE"):
        place(env)
    assert place(env, group=(3, 4)) == (3, 4, 1, 2, 1)
    node0 = {"NODE_RANK": "0", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}
    assert place(node0, group=(1, 4), hosts=["a", "a", "b", "b"]) == (1, 4, 1, 2, 0)


def test_ddp_spawn_child_uses_the_group_and_host_names() -> None:
    assert place({"LOCAL_RANK": "1"}, group=(1, 2), hosts=["h", "h"]) == (1, 2, 1, 2, 0)
    with pytest.raises(WorldDetectionError, match="WORLD_SIZE"):
        place({"LOCAL_RANK": "1"})


def test_slurm_tasks() -> None:
    env = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_LOCALID": "1",
           "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}
    assert place(env) == (3, 4, 1, 2, 1)
    by_nodes = {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "6", "SLURM_STEP_NUM_NODES": "3"}
    assert place(by_nodes) == (2, 6, 0, 2, 1)
    # a batch script's own process: the allocation's task count, but no srun step
    batch = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
             "SLURM_NNODES": "4", "SLURM_TASKS_PER_NODE": "1(x4)"}
    assert place(batch) == (0, 1, 0, 1, 0)
    uneven = {**env, "SLURM_STEP_TASKS_PER_NODE": "3,1"}
    with pytest.raises(WorldDetectionError, match="same number of ranks"):
        place(uneven)


def test_mpi_launchers() -> None:
    ompi = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert place(ompi) == (2, 4, 0, 2, 1)
    pmi = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    assert place(pmi) == (1, 2, 1, 2, 0)


def test_order_torchrun_before_slurm_and_group_before_all() -> None:
    inside_sbatch = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                     "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}
    assert place(inside_sbatch) == (3, 4, 1, 2, 1)
    assert place(inside_sbatch, group=(3, 4)) == (3, 4, 1, 2, 1)
    # mp.spawn inside an allocation: the group's size matches no variables; host names decide
    spawned = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}
    assert place(spawned, group=(2, 4), hosts=["a", "a", "b", "b"]) == (2, 4, 0, 2, 1)


def test_inconsistent_sources_name_everything_read() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "SLURM_PROCID": "1",
           "SLURM_STEP_NUM_TASKS": "2"}
    with pytest.raises(WorldDetectionError) as err:
        place(env, group=(1, 2))
    message = str(err.value)
    for named in ("torch.distributed", "rank=1", "torchrun variables", "RANK=0",
                  "SLURM variables", "SLURM_PROCID=1", "world=World"):
        assert named in message
    bad = {"RANK": "0", "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "4"}
    with pytest.raises(PlanError, match="LOCAL_WORLD_SIZE=4"):
        place(bad)
    with pytest.raises(WorldDetectionError, match="WORLD_SIZE='x'"):
        place({"RANK": "0", "WORLD_SIZE": "x"})
    with pytest.raises(WorldDetectionError, match="consecutive"):
        place({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"})


def test_a_dataset_built_before_the_process_group_is_refused(tmp_path, monkeypatch) -> None:
    import torch.distributed as dist

    from streaming import StreamingDataset
    from tests.support.datasets import write_ids

    data = write_ids(tmp_path / "src", 20)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    early = StreamingDataset(local=str(data))  # as rank 1 of 2, before the group exists
    explicit = StreamingDataset(local=str(data), world=World(ranks_per_node=2, rank_in_node=1))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        check_unchanged(World())
        with pytest.raises(WorldDetectionError, match="process group says rank 0 of 1"):
            len(early)
        with pytest.raises(WorldDetectionError, match="process group says rank 0 of 1"):
            next(iter(early))
        assert len(explicit) == 10  # an explicit world is the user's word
        assert place({"LOCAL_RANK": "0"}, group=(0, 1)) == (0, 1, 0, 1, 0)
    finally:
        dist.destroy_process_group()
        early.close()
        explicit.close()
