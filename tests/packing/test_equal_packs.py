"""equal_packs across nodes: each node counts only its own ranks' packs and the nodes swap
their counts through the job's store: under two real torchrun agents (the agent hosts the
store), and under the store rank 0 hosts after a gloo process group starts. Without a store,
or with a node that never answers, a node counts every node itself, with a warning, and
reaches the same number."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from torch.distributed import TCPStore

from streaming.packing.equal import PackCountWarning
from streaming.packing.streaming import PackedStreamingDataset
from streaming.plan import World
from tests.support.datasets import write_tokens
from tests.support.processes import free_port

N = 400
NODES, PER_NODE = 2, 2
TIMEOUT = 180
_LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
             "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
             "STREAMING_NODE_EXCHANGE_TIMEOUT")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("equal") / "a"
    write_tokens(root, N, max_len=300)
    return root


@pytest.fixture
def no_launcher(monkeypatch) -> None:
    for name in _LAUNCHER:
        monkeypatch.delenv(name, raising=False)


def rank_zero_of_two_nodes(data: Path) -> PackedStreamingDataset:
    return PackedStreamingDataset(local=str(data), shuffle=True, packing_length=512,
                                  packs_per_batch=2, batch_size=4,
                                  world=World(NODES, PER_NODE, 1, 0, 0))


def counted_warned(data: Path, match: str) -> int:
    """Node 0's epoch-0 count, found with a PackCountWarning matching `match`."""
    ds = rank_zero_of_two_nodes(data)
    try:
        with pytest.warns(PackCountWarning, match=match):
            return ds.pack_count(0)
    finally:
        ds.close()


def counted_alone(data: Path) -> int:
    """Node 0's count when it must count every node itself (no store)."""
    return counted_warned(data, "MASTER_ADDR/MASTER_PORT are not set")


def _run(commands: list[tuple[list[str], dict[str, str]]]) -> list[dict]:
    """Start every (argv, env) at once; the JSON line each rank printed, ordered by rank."""
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, start_new_session=True) for argv, env in commands]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, err[-3000:]
            assert "PackCountWarning" not in err, err[-3000:]
            results += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return sorted(results, key=lambda r: (r["world"]["node"], r["world"]["rank_in_node"]))


@pytest.mark.slow
@pytest.mark.parametrize("host", ["torchrun", "rank0"])
def test_nodes_count_their_own_ranks_and_swap_counts(data: Path, no_launcher, host: str) -> None:
    """torchrun: two real agents (static rendezvous on loopback), two ranks each, the store
    hosted by an agent; rank0: the ranks join a gloo process group and rank 0's process hosts
    the store."""
    base = {k: v for k, v in os.environ.items() if k not in _LAUNCHER}
    script = str(Path(__file__).with_name("multinode_rank.py"))
    port = free_port()
    if host == "torchrun":
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(NODES),
                    "--nproc-per-node", str(PER_NODE), "--master-addr", "127.0.0.1",
                    "--master-port", str(port)]
        commands = [([*torchrun, "--node-rank", str(node), script, str(data)], base)
                    for node in range(NODES)]
    else:
        job = {"WORLD_SIZE": str(NODES * PER_NODE), "LOCAL_WORLD_SIZE": str(PER_NODE),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "TORCHELASTIC_RUN_ID": uuid.uuid4().hex}
        commands = [([sys.executable, script, str(data), "--init-group"],
                     {**base, **job, "RANK": str(rank), "LOCAL_RANK": str(rank % PER_NODE),
                      "GROUP_RANK": str(rank // PER_NODE)})
                    for rank in range(NODES * PER_NODE)]
    results = _run(commands)
    assert len(results) == NODES * PER_NODE
    for rank, result in enumerate(results):
        assert (result["world"]["node"], result["world"]["rank_in_node"]) == divmod(rank, 2)
    for node in range(NODES):
        mine = [n for r in results if r["world"]["node"] == node for n in r["counted"]]
        assert set(mine) == {node}  # its own ranks only
    # at most once per epoch in each process (a peer that comes after the publisher dropped
    # the node's result counts again: the same number)
    assert all(len(r["counted"]) <= 2 for r in results)
    packs = {r["packs0"] for r in results}
    assert packs == {counted_alone(data)}  # the same number as counting every node
    assert {r["promised"][0] for r in results} == {r["steps"][0] for r in results}
    for epoch in range(2):
        steps = {r["steps"][epoch] for r in results}
        assert len(steps) == 1  # every rank steps equally, in both epochs
        seen = sorted(i for r in results for i in r["epochs"][epoch])
        assert seen == list(range(N))
    assert results[0]["epochs"][0] != results[0]["epochs"][1]


def test_nothing_at_the_store_address_counts_every_node(data: Path, no_launcher,
                                                        monkeypatch) -> None:
    expected = counted_alone(data)
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    assert counted_warned(data, f"no job store answers at 127.0.0.1:{port}") == expected


def test_a_node_that_never_publishes_is_waited_for_then_counted(data: Path, no_launcher,
                                                               monkeypatch) -> None:
    expected = counted_alone(data)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                     timeout=timedelta(seconds=30))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(store.port))
    monkeypatch.setenv("STREAMING_NODE_EXCHANGE_TIMEOUT", "0.5")
    assert counted_warned(data, r"nodes \[1\] of 2 did not publish") == expected
