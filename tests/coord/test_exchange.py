"""coord.exchange: nodes swap one integer each through a real TCP key-value store (torch's
TCPStore on loopback, as torchrun's agent runs it), from separate processes, with deadlines."""

from __future__ import annotations

import multiprocessing as mp
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from torch.distributed import TCPStore

from streaming.coord.exchange import (
    NodeExchange,
    StoreAddress,
    launcher_store,
    wait_timeout,
)
from streaming.errors import CoordinationError, DeadlineExceeded


@pytest.fixture
def store() -> StoreAddress:
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=30))
    yield StoreAddress("127.0.0.1", server.port)
    del server


def _node(addresses: mp.Queue, node: int, value: int, out: mp.Queue) -> None:
    address = addresses.get(timeout=60)
    out.put((node, NodeExchange(address, timeout=30).gather("k/epoch0", node, 3, value)))


def test_every_node_gets_every_value_in_node_order() -> None:
    # The node processes are forked before the store's server (and its threads) exists, so no
    # child inherits a copy of it; they learn its address through a queue.
    ctx = mp.get_context("fork")  # separate processes, without importing torch again
    addresses, out = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_node, args=(addresses, node, value, out))
             for node, value in ((0, 7), (1, 3), (2, 11))]
    for proc in procs:
        proc.start()
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=30))
    for _ in procs:
        addresses.put(StoreAddress("127.0.0.1", server.port))
    results = dict(out.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    assert results == {0: [7, 3, 11], 1: [7, 3, 11], 2: [7, 3, 11]}
    del server


def test_a_node_that_never_publishes_is_named_after_the_deadline(store: StoreAddress) -> None:
    exchange = NodeExchange(store, timeout=0.5)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"nodes \[1\] of 2 did not publish 'k/e1'"):
        exchange.gather("k/e1", 0, 2, 5)
    assert time.monotonic() - began < 20


def test_nothing_listening_is_a_coordination_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(CoordinationError, match=f"no job store answers at 127.0.0.1:{port}"):
        NodeExchange(StoreAddress("127.0.0.1", port), connect_timeout=2)


_SILENT_PEER = """
import socket, sys, time
from streaming.coord.exchange import NodeExchange, StoreAddress
from streaming.errors import CoordinationError
with socket.socket() as silent:  # accepts connections, never speaks the store's protocol
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    began = time.monotonic()
    try:
        NodeExchange(StoreAddress("127.0.0.1", silent.getsockname()[1]), connect_timeout=1)
    except CoordinationError as exc:
        print("raised after", round(time.monotonic() - began), "s:", exc, flush=True)
"""


def test_a_silent_peer_is_given_up_on_after_the_deadline() -> None:
    # A subprocess: the abandoned handshake thread may abort the interpreter at its exit.
    run = subprocess.run([sys.executable, "-c", _SILENT_PEER], capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).resolve().parents[2])
    line = next((x for x in run.stdout.splitlines() if x.startswith("raised after")), "")
    assert "did not answer as a job store within 6s" in line, run.stdout + run.stderr[-2000:]
    assert int(line.split()[2]) <= 10


def test_address_and_timeout_come_from_the_launcher_environment() -> None:
    assert launcher_store({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}) == \
        StoreAddress("10.0.0.1", 29500)
    assert launcher_store({"MASTER_ADDR": "10.0.0.1"}) is None
    assert launcher_store({"MASTER_PORT": "29500"}) is None
    assert launcher_store({"MASTER_ADDR": "h", "MASTER_PORT": "x"}) is None
    assert wait_timeout({}) == 120.0
    assert wait_timeout({"STREAMING_NODE_EXCHANGE_TIMEOUT": "12.5"}) == 12.5
    for bad in ("soon", "0", "-3"):
        with pytest.raises(CoordinationError, match="STREAMING_NODE_EXCHANGE_TIMEOUT"):
            wait_timeout({"STREAMING_NODE_EXCHANGE_TIMEOUT": bad})
