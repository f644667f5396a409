"""Pure, deterministic epoch planning: mixing, sampling, shuffling, partitioning, batching.

No torch, threads or I/O here (streaming.coord.world_detect builds a World from the launcher).
"""

from streaming.plan.config import PlanConfig
from streaming.plan.mixing import StreamWeights, parse_epoch_size
from streaming.plan.planner import NodePlan, global_order, plan_node, plan_worker
from streaming.plan.world import World

__all__ = [
    "NodePlan",
    "PlanConfig",
    "StreamWeights",
    "World",
    "global_order",
    "parse_epoch_size",
    "plan_node",
    "plan_worker",
]
