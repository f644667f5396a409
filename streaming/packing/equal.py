"""The pack count every rank is grown to in an epoch (packing's `equal_packs`): the largest
natural count of any rank of the job.

Each node replays the packer over its own ranks' planned samples only, then the nodes swap their
largest count through the job's store (coord.exchange). Without a reachable store (no
MASTER_ADDR/MASTER_PORT, or nothing answering there, or a node that never publishes), the node
replays every node's ranks instead: the same number, at the cost of the whole epoch.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable

from streaming.coord.exchange import NodeExchange, launcher_store
from streaming.errors import CoordinationError
from streaming.plan import World


class PackCountWarning(UserWarning):
    """The nodes could not swap pack counts, so this node counted every node's packs itself."""


def node_most_packs(count: Callable[[World], int], world: World, node: int) -> int:
    """The largest pack count of `node`'s ranks; `count` packs one rank (seen as `world`)."""
    return max(count(world.with_position(node, rank)) for rank in range(world.ranks_per_node))


def job_most_packs(count: Callable[[World], int], world: World, key: str) -> int:
    """The largest pack count of any rank of the job (`world` is the asking rank's), agreed on
    through the job's store when one answers; `key` names the epoch and setup counted."""
    own = node_most_packs(count, world, world.node)
    if world.num_nodes == 1:
        return own
    address = launcher_store()
    try:
        if address is None:
            raise CoordinationError("MASTER_ADDR/MASTER_PORT are not set")
        digest = hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
        return max(NodeExchange(address).gather(f"packs/{digest}", world.node,
                                                world.num_nodes, own))
    except CoordinationError as exc:
        warnings.warn(f"packing: the nodes could not swap their pack counts ({exc}); this node "
                      f"replays the packer over all {world.num_nodes} nodes' samples to find "
                      f"the count instead (same result, the whole epoch's cost)",
                      PackCountWarning, stacklevel=2)
    others = (node_most_packs(count, world, node) for node in range(world.num_nodes)
              if node != world.node)
    return max(own, *others)
