"""Build a World from torch.distributed environment variables and DataLoader worker info."""

from __future__ import annotations

import os

from streaming.errors import PlanError
from streaming.plan.world import World


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise PlanError(f"environment variable {name}={raw!r} is not an integer") from None


def world_from_env(workers_per_rank: int | None = None, replication: int = 1) -> World:
    """World of the calling process; torch is imported only to ask for the worker info."""
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_world = _env_int("LOCAL_WORLD_SIZE", world_size)
    local_rank = _env_int("LOCAL_RANK", rank % max(local_world, 1))
    if local_world < 1 or world_size % local_world:
        raise PlanError(
            f"WORLD_SIZE={world_size} is not a multiple of LOCAL_WORLD_SIZE={local_world}"
        )
    if not 0 <= rank < world_size or local_rank != rank % local_world:
        raise PlanError(
            f"RANK={rank} / LOCAL_RANK={local_rank} inconsistent with WORLD_SIZE={world_size}, "
            f"LOCAL_WORLD_SIZE={local_world}"
        )
    worker, num_workers = 0, 1
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # torch absent: a plain single-worker process
        info = None
    else:
        info = get_worker_info()
    if info is not None:
        worker, num_workers = info.id, info.num_workers
    if workers_per_rank is not None:
        num_workers = workers_per_rank
    return World(
        num_nodes=world_size // local_world,
        ranks_per_node=local_world,
        workers_per_rank=max(num_workers, 1),
        node=rank // local_world,
        rank_in_node=local_rank,
        worker=worker,
        replication=replication,
    )
