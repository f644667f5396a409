"""Batching methods by name: how an epoch's samples are grouped into global batches.

Every method returns, for the asking node group, an int64 array [batches, group ranks, batch]
and the resume position it actually used. Global batch g is positions [g*B, (g+1)*B) of the
method's global sequence, B = batch x data-parallel ranks, whatever the number of nodes. Each
module exports its `METHOD` record (streaming.plan.traits).
"""

from __future__ import annotations

from streaming.plan.batching import device_per_stream, per_stream, random, stratified
from streaming.plan.traits import BatchingMethod, registered

BATCHINGS: dict[str, BatchingMethod] = {
    "random": random.METHOD,
    "stratified": stratified.METHOD,
    "per_stream": per_stream.METHOD,
    "device_per_stream": device_per_stream.METHOD,
}
METHODS = tuple(BATCHINGS)


def get_method(name: str) -> BatchingMethod:
    """The batching method registered under `name` (PlanError for unknown names)."""
    return registered(BATCHINGS, "batching_method", name)
