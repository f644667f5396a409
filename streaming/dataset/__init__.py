"""The dataset a training loop iterates: `StreamingDataset` (streams planned over the world and
read through the node's cache) and `LocalDataset` (one local MDS directory), with the parts the
streaming one is built from: `catalog` (streams and their indexes), `session` (coordination
and resume state on the node) and `reference_api` (the reference's methods and properties); its
rows are read by `streaming.read.row_reader`, and the plan config is fitted to the cache by
`streaming.cache.policy.plan_fit`.

The classes load lazily, so importing a part (e.g. `streaming.dataset.catalog`) does not import
torch.
"""

from __future__ import annotations

from streaming.exports import lazy_exports

__all__ = ["LocalDataset", "StreamingDataset", "clean_stale_shared_memory"]

__getattr__, __dir__ = lazy_exports(globals())
