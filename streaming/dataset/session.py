"""A dataset's session on its node: the node coordinator it joined, this rank's epoch counter
and the plan board the node's ranks share plans through, and the three views over them that
the dataset uses: the plan (`plans`), this process's iteration (`run`) and the resume state
(`resume`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from streaming.coord.names import Namespace
from streaming.coord.node import NodeCoordinator
from streaming.coord.plans import PlanBoard
from streaming.dataset.epochs import EpochCounter
from streaming.dataset.iteration_run import IterationRun
from streaming.dataset.plan_view import PlanView
from streaming.dataset.resumption import Resumption
from streaming.plan import PlanConfig, World

JOIN_TIMEOUT = 120.0  # seconds a local rank waits for its node's leader at start-up


class Session:
    """The node-shared pieces of one dataset and the views over them (picklable: DataLoader
    workers attach to the same shared segments by name).

    Args:
        config: The dataset's plan config (its fingerprint salts the shared names).
        world: The rank's world.
        local_dirs: The streams' cache folders (they name the job on the node).
        detected: Whether `world` was detected (then checked unchanged before iterating).
    """

    def __init__(self, config: PlanConfig, world: World, local_dirs: Sequence[Path | str], *,
                 detected: bool) -> None:
        self.config, self.world = config, world
        self.namespace = Namespace.for_job(list(local_dirs), salt=config.fingerprint())
        self.node = NodeCoordinator.join(self.namespace, timeout=JOIN_TIMEOUT)
        rank = world.rank_in_node
        self.epochs = EpochCounter(self.namespace.name(f"e{rank}"),
                                   self.namespace.name(f"e{rank}k"), create=True)
        self.board = PlanBoard(self.namespace)
        self.plans = PlanView(config, world, self.epochs, self.board)
        self.run = IterationRun(self.plans, self.epochs, self.node, self.board,
                                detected=detected)
        self.resume = Resumption(self.plans, self.epochs, self.run)

    def shared_name(self, tag: str) -> str:
        """The name of a shared-memory segment `tag` of this dataset on its node.

        Args:
            tag: The segment's tag, unique within the dataset.
        """
        return self.namespace.name(tag)

    def close(self) -> None:
        """Detach from the board, the epoch counter and the node."""
        self.board.close()
        self.epochs.close()
        self.node.close()
