"""Small values exchanged between the nodes of a job through the launcher's key-value store.

Nodes share no memory, so a number every node must agree on (packing's pack count per epoch) is
either recomputed by every node for all nodes, or each node computes its own share and they swap
results. The swap goes through the TCP key-value store every torch.distributed launch already runs
at MASTER_ADDR:MASTER_PORT (torchrun's agent store, or rank 0's store under Lightning and other
`env://` launches). Any process can be its client, DataLoader workers included: unlike a
collective, nothing requires every rank to call at the same moment, and every wait has a deadline.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from streaming.errors import CoordinationError, DeadlineExceeded

CONNECT_TIMEOUT = 10.0  # seconds to reach the store before giving up on it
CONNECT_GRACE = 5.0  # beyond the client's own timeout, before its handshake is abandoned
WAIT_TIMEOUT = 120.0  # seconds to wait for the other nodes (well inside the plan lock's 300)
TIMEOUT_VARIABLE = "STREAMING_NODE_EXCHANGE_TIMEOUT"
PREFIX = "mds-streaming/"

if TYPE_CHECKING:
    from torch.distributed import TCPStore


@dataclass(frozen=True)
class StoreAddress:
    """Where the job's key-value store listens."""

    host: str
    port: int


def launcher_store(env: Mapping[str, str] | None = None) -> StoreAddress | None:
    """The store of the job's launcher (MASTER_ADDR and MASTER_PORT), or None when unset."""
    env = os.environ if env is None else env
    host, port = env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")
    if not host or not port.isdigit():
        return None
    return StoreAddress(host, int(port))


def wait_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds to wait for the other nodes (STREAMING_NODE_EXCHANGE_TIMEOUT, else 120)."""
    env = os.environ if env is None else env
    raw = env.get(TIMEOUT_VARIABLE, "")
    if not raw:
        return WAIT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise CoordinationError(f"{TIMEOUT_VARIABLE}={raw!r} is not a number of seconds"
                                ) from None
    if value <= 0:
        raise CoordinationError(f"{TIMEOUT_VARIABLE}={raw!r} must be positive")
    return value


class NodeExchange:
    """One client of the job's store, swapping one integer per node under a shared key."""

    def __init__(self, address: StoreAddress, *, connect_timeout: float = CONNECT_TIMEOUT,
                 timeout: float | None = None) -> None:
        self.address = address
        self.timeout = wait_timeout() if timeout is None else timeout
        self._store = _connect(address, connect_timeout)

    def gather(self, key: str, node: int, num_nodes: int, value: int) -> list[int]:
        """Publish this node's `value` under `key` and return every node's, in node order;
        DeadlineExceeded names the nodes that did not publish in time."""
        from torch.distributed import DistError

        names = [f"{PREFIX}{key}/{k}" for k in range(num_nodes)]
        try:
            self._store.set(names[node], str(int(value)))
            self._store.wait(names, timedelta(seconds=self.timeout))
        except DistError as exc:
            missing = [k for k, name in enumerate(names) if not self._has(name)]
            raise DeadlineExceeded(
                f"nodes {missing} of {num_nodes} did not publish {key!r} to the job store at "
                f"{self.address.host}:{self.address.port} within {self.timeout:g}s ({exc}); "
                f"raise {TIMEOUT_VARIABLE} if a node is only slow") from None
        return [int(self._store.get(name)) for name in names]

    def _has(self, name: str) -> bool:
        try:
            return bool(self._store.check([name]))
        except Exception:  # the store went away while we looked: treat as missing
            return False


def _connect(address: StoreAddress, timeout: float) -> TCPStore:
    """A client of the store at `address`; CoordinationError when nothing answers there as a
    store within `timeout` seconds."""
    try:  # a plain probe first: a refused port fails fast and without the store's retry logs
        socket.create_connection((address.host, address.port), timeout=timeout).close()
    except OSError as exc:
        raise CoordinationError(f"no job store answers at {address.host}:{address.port} "
                                f"(MASTER_ADDR:MASTER_PORT): {exc}") from None
    # The client's handshake has no deadline of its own against a peer that accepts and stays
    # silent, so it runs in a daemon thread that is abandoned when it overruns.
    outcome: list[TCPStore | BaseException] = []
    thread = threading.Thread(target=_client, args=(address, timeout, outcome), daemon=True,
                              name="mds-streaming-store-connect")
    thread.start()
    thread.join(timeout + CONNECT_GRACE)
    if not outcome:
        raise CoordinationError(f"{address.host}:{address.port} (MASTER_ADDR:MASTER_PORT) "
                                f"accepted a connection but did not answer as a job store "
                                f"within {timeout + CONNECT_GRACE:g}s")
    if isinstance(outcome[0], BaseException):
        raise CoordinationError(f"{address.host}:{address.port} (MASTER_ADDR:MASTER_PORT) is "
                                f"not a job store this process can use: {outcome[0]}")
    return outcome[0]


def _client(address: StoreAddress, timeout: float,
            outcome: list[TCPStore | BaseException]) -> None:
    from torch.distributed import TCPStore as Client

    try:
        outcome.append(Client(address.host, address.port, is_master=False,
                              timeout=timedelta(seconds=timeout), wait_for_workers=False))
    except Exception as exc:  # the store's DistError, or whatever the peer made it raise
        outcome.append(exc)
