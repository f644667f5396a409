"""Inside Ray Train's TorchTrainer workers a StreamingDataset finds its world with no arguments:
Ray Train sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and NODE_RANK (the torchrun
names) and initialises torch.distributed before the training function runs. Here: the world
read from exactly those variables, alone and beside a process group of the same size. The
same check on a real TorchTrainer is in tests/convert/test_ray.py (opt-in, it is slow)."""

from __future__ import annotations

import pytest

from streaming.coord.world_detect import detect_placement


def ray_train_env(rank: int, local_rank: int, local_size: int, node: int, size: int) -> dict:
    return {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_size), "NODE_RANK": str(node),
            "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize("group", [False, True])
@pytest.mark.parametrize(("rank", "local_rank", "node"), [(0, 0, 0), (3, 1, 1), (5, 1, 2)])
def test_world_from_ray_train_variables(rank, local_rank, node, group):
    env = ray_train_env(rank, local_rank, 2, node, 6)
    placement = detect_placement(env, group=(rank, 6) if group else False)
    assert (placement.rank, placement.world_size, placement.local_rank,
            placement.local_world_size, placement.node) == (rank, 6, local_rank, 2, node)
