"""Where this process sits in the training job: node, rank and DataLoader worker.

The one module that asks torch (the process group, DataLoader worker info) and the launchers'
environment variables; `streaming.plan` only ever sees the pure `World` built here.

Order: an initialised torch.distributed process group (rank and world size; ranks per node from
the environment, else from the group); otherwise the variables of torchrun (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE), Lightning's launcher (NODE_RANK, LOCAL_RANK, WORLD_SIZE, no
RANK), SLURM's srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_NODEID, tasks
per node) and MPI launchers (OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE with MPI_LOCALRANKID and
MPI_LOCALNRANKS), the first present winning; otherwise a single process. An explicit `world=`
skips all of this.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streaming.errors import WorldDetectionError
from streaming.plan.world import World


@dataclass(frozen=True)
class Placement:
    """What one source says about this process (None: the source does not tell)."""

    source: str
    rank: int | None
    world_size: int | None
    local_rank: int | None = None
    local_world_size: int | None = None
    node: int | None = None
    read: str = ""  # the variables or calls it was read from, for messages


@dataclass(frozen=True)
class WorkerSlot:
    """This process's DataLoader worker index and the loader's worker count."""

    id: int
    num_workers: int


def worker_slot() -> WorkerSlot | None:
    """The DataLoader worker this process is, or None in the training process itself."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # torch absent: a plain process
        return None
    info = get_worker_info()
    return None if info is None else WorkerSlot(int(info.id), int(info.num_workers))


def in_worker() -> bool:
    """Whether this process is a DataLoader worker."""
    return worker_slot() is not None


# ----- environment sources -------------------------------------------------------------------
def _present(env: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    return {name: env[name] for name in names if env.get(name, "") != ""}


def _int(values: dict[str, str], name: str, source: str) -> int | None:
    raw = values.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise WorldDetectionError(
            f"environment variable {name}={raw!r} ({source}) is not an integer") from None


def _described(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


_TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")
_LIGHTNING = ("NODE_RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
_SLURM = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_LOCALID",
          "SLURM_NODEID", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE",
          "SLURM_STEP_NUM_NODES", "SLURM_NNODES")
_OMPI = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE")
_PMI = ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")


def _torchrun(env: Mapping[str, str]) -> Placement | None:
    """torchrun / torch.distributed.launch: RANK and WORLD_SIZE (WORLD_SIZE alone: rank 0)."""
    v = _present(env, _TORCHRUN)
    lightning_like = "LOCAL_RANK" in v or env.get("NODE_RANK", "") != ""
    if "RANK" not in v and ("WORLD_SIZE" not in v or lightning_like):
        return None
    src = "torchrun variables"
    return Placement(src, _int(v, "RANK", src) or 0, _int(v, "WORLD_SIZE", src) or 1,
                     _int(v, "LOCAL_RANK", src), _int(v, "LOCAL_WORLD_SIZE", src),
                     _int(v, "GROUP_RANK", src), _described(v))


def _lightning(env: Mapping[str, str]) -> Placement | None:
    """Lightning's launcher: LOCAL_RANK, WORLD_SIZE and NODE_RANK, but no RANK. The rank is
    known when the ranks per node are (LOCAL_WORLD_SIZE) or on node 0."""
    v = _present(env, _LIGHTNING)
    if "RANK" in env or not ({"LOCAL_RANK", "NODE_RANK"} & v.keys()):
        return None
    src = "Lightning variables"
    node = _int(v, "NODE_RANK", src)
    node = (_int(v, "GROUP_RANK", src) or 0) if node is None else node
    local_rank = _int(v, "LOCAL_RANK", src) or 0
    local_world = _int(v, "LOCAL_WORLD_SIZE", src)
    rank = None
    if local_world is not None:
        rank = node * local_world + local_rank
    elif node == 0:
        rank = local_rank
    return Placement(src, rank, _int(v, "WORLD_SIZE", src), local_rank, local_world, node,
                     _described(v))


def _tasks_per_node(raw: str | None) -> int | None:
    """SLURM's tasks-per-node list ("4", "4(x2)", "4,4"): the count when every node has the
    same, else None."""
    if not raw:
        return None
    counts = set()
    for part in raw.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x\d+\))?", part.strip())
        if match is None:
            return None
        counts.add(int(match.group(1)))
    return counts.pop() if len(counts) == 1 else None


def _slurm(env: Mapping[str, str]) -> Placement | None:
    """A task started by srun: SLURM_PROCID of SLURM_STEP_NUM_TASKS. A batch script's own
    process also sees SLURM_PROCID=0 and the allocation's SLURM_NTASKS but no step variables:
    it is one process, not rank 0 of SLURM_NTASKS."""
    v = _present(env, _SLURM)
    if "SLURM_PROCID" not in v or "SLURM_STEP_NUM_TASKS" not in v:
        return None
    src = "SLURM variables"
    size = _int(v, "SLURM_STEP_NUM_TASKS", src)
    per_node = _tasks_per_node(v.get("SLURM_STEP_TASKS_PER_NODE")) \
        or _tasks_per_node(v.get("SLURM_NTASKS_PER_NODE"))
    nodes = _int(v, "SLURM_STEP_NUM_NODES", src) or _int(v, "SLURM_NNODES", src)
    if per_node is None and nodes and size and size % nodes == 0:
        per_node = size // nodes
    if per_node is None and ({"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"} & v.keys()):
        raise WorldDetectionError(
            f"SLURM gives nodes different task counts ({_described(v)}); every node needs the "
            "same number of ranks: pass world=World(...) or launch equal tasks per node")
    return Placement(src, _int(v, "SLURM_PROCID", src), size, _int(v, "SLURM_LOCALID", src),
                     per_node, _int(v, "SLURM_NODEID", src), _described(v))


def _mpi(env: Mapping[str, str]) -> Placement | None:
    """Open MPI's OMPI_COMM_WORLD_*, or the PMI_RANK/PMI_SIZE of MPICH and Intel MPI."""
    v = _present(env, _OMPI)
    if "OMPI_COMM_WORLD_RANK" in v and "OMPI_COMM_WORLD_SIZE" in v:
        src = "Open MPI variables"
        return Placement(src, _int(v, "OMPI_COMM_WORLD_RANK", src),
                         _int(v, "OMPI_COMM_WORLD_SIZE", src),
                         _int(v, "OMPI_COMM_WORLD_LOCAL_RANK", src),
                         _int(v, "OMPI_COMM_WORLD_LOCAL_SIZE", src), None, _described(v))
    v = _present(env, _PMI)
    if "PMI_RANK" in v and "PMI_SIZE" in v:
        src = "PMI variables"
        return Placement(src, _int(v, "PMI_RANK", src), _int(v, "PMI_SIZE", src),
                         _int(v, "MPI_LOCALRANKID", src), _int(v, "MPI_LOCALNRANKS", src), None,
                         _described(v))
    return None


ENV_SOURCES: tuple[Callable[[Mapping[str, str]], Placement | None], ...] = (
    _torchrun, _lightning, _slurm, _mpi)


def env_placements(env: Mapping[str, str] | None = None) -> list[Placement]:
    """What each launcher's variables say, in order of precedence (absent ones left out)."""
    env = os.environ if env is None else env
    return [p for p in (source(env) for source in ENV_SOURCES) if p is not None]


# ----- torch.distributed -----------------------------------------------------------------------
def process_group() -> tuple[int, int] | None:
    """(rank, world size) of an initialised default torch.distributed group, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return int(dist.get_rank()), int(dist.get_world_size())


def _hosts_of_group() -> list[str]:
    """Every rank's host name, gathered over the default group (one collective)."""
    import torch.distributed as dist

    if in_worker():
        raise WorldDetectionError(
            "the ranks per node are unknown (no LOCAL_WORLD_SIZE or launcher variables) and a "
            "DataLoader worker cannot ask the process group: build the dataset in the "
            "training process or pass world=World(...)")
    hosts: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    return [str(h) for h in hosts]


def _from_hosts(rank: int, hosts: list[str]) -> Placement:
    mine = hosts[rank]
    local = [r for r, host in enumerate(hosts) if host == mine]
    order = list(dict.fromkeys(hosts))
    return Placement("torch.distributed host names", rank, len(hosts), local.index(rank),
                     len(local), order.index(mine), f"hosts={hosts}")


# ----- resolution ------------------------------------------------------------------------------
def detect_placement(env: Mapping[str, str] | None = None,
                     group: tuple[int, int] | bool | None = True,
                     hosts: Callable[[], list[str]] = _hosts_of_group) -> Placement:
    """This process's placement by the order in the module docstring, checked for
    consistency (WorldDetectionError naming every source read). `group=True` asks torch."""
    if group is True:
        group = process_group()
    found = env_placements(env)
    if group:
        rank, size = group
        by_group = Placement("torch.distributed", rank, size, read=f"rank={rank}, "
                             f"world_size={size}")
        same = [p for p in found if p.world_size == size]
        if not same:
            local = hosts() if size > 1 else [socket.gethostname()]
            return _checked(_from_hosts(rank, local), [by_group, *found])
        chosen = same[0]
        if chosen.rank is not None and chosen.rank != rank:
            raise _inconsistent(f"rank {rank} of the process group differs from "
                                f"{chosen.source}' rank {chosen.rank}", [by_group, *found])
        local_world = chosen.local_world_size
        if local_world is None and chosen.node and chosen.local_rank is not None:
            local_world = (rank - chosen.local_rank) // chosen.node  # Lightning on node > 0
        if local_world is None:
            return _checked(_from_hosts(rank, hosts()), [by_group, *found])
        placed = Placement(f"torch.distributed + {chosen.source}", rank, size,
                           chosen.local_rank, local_world, chosen.node, chosen.read)
        return _checked(placed, [by_group, *found])
    if not found:
        return Placement("single process", 0, 1, 0, 1, 0)
    chosen = found[0]
    if chosen.rank is None or chosen.world_size is None:
        raise _inconsistent(
            f"{chosen.source} do not say this process's rank or the world size (NODE_RANK > 0 "
            "needs LOCAL_WORLD_SIZE, LOCAL_RANK needs WORLD_SIZE); build the dataset after "
            "the process group is initialised or pass world=World(...)", found)
    return _checked(chosen, found)


def _checked(p: Placement, read: list[Placement]) -> Placement:
    """`p` with every field filled, or WorldDetectionError if its numbers contradict."""
    rank, size = p.rank, p.world_size
    assert rank is not None and size is not None
    local_world = p.local_world_size
    if local_world is None:
        local_world = size
    if size < 1 or local_world < 1 or size % local_world:
        raise _inconsistent(f"world size {size} is not a multiple of {local_world} ranks per "
                            "node", read)
    if not 0 <= rank < size:
        raise _inconsistent(f"rank {rank} is outside a world of {size}", read)
    local_rank = rank % local_world if p.local_rank is None else p.local_rank
    node = rank // local_world
    if local_rank != rank % local_world or (p.node is not None and p.node != node):
        raise _inconsistent(
            f"rank {rank}, local rank {local_rank} and node {p.node} do not fit {local_world} "
            f"ranks per node with consecutive ranks on each node", read)
    return Placement(p.source, rank, size, local_rank, local_world, node, p.read)


def _inconsistent(what: str, read: list[Placement]) -> WorldDetectionError:
    sources = "; ".join(f"{p.source}: {p.read}" for p in read) or "nothing"
    return WorldDetectionError(
        f"cannot place this process in the training job: {what}. Read {sources}. Pass "
        "world=World(...) to StreamingDataset to say it explicitly.")


def detect_world(workers_per_rank: int | None = None, replication: int = 1,
                 env: Mapping[str, str] | None = None) -> World:
    """The World of the calling process (and of its DataLoader worker, if it is one)."""
    p = detect_placement(env)
    assert p.rank is not None and p.world_size is not None and p.local_world_size is not None
    slot = worker_slot()
    worker, num_workers = (slot.id, slot.num_workers) if slot is not None else (0, 1)
    if workers_per_rank is not None:
        num_workers = workers_per_rank
    return World(
        num_nodes=p.world_size // p.local_world_size,
        ranks_per_node=p.local_world_size,
        workers_per_rank=max(num_workers, 1),
        node=p.rank // p.local_world_size,
        rank_in_node=p.rank % p.local_world_size,
        worker=worker,
        replication=replication,
    )


def check_unchanged(world: World) -> None:
    """WorldDetectionError if a process group now says something else than `world`, the
    place detected when the dataset was built (e.g. built before Lightning's ddp_spawn or
    launcher started the group: every copy would then read rank 0's share)."""
    group = process_group()
    if group is None or group == (world.rank, world.world_size):
        return
    raise WorldDetectionError(
        f"this dataset was built as rank {world.rank} of {world.world_size}, but the "
        f"torch.distributed process group says rank {group[0]} of {group[1]}: build the "
        "dataset after the process group is initialised (e.g. in LightningDataModule.setup "
        "or train_dataloader) or pass world=World(...)")
