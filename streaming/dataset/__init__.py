"""The dataset a training loop iterates: `StreamingDataset` (streams planned over the world and
read through the node's cache) and `LocalDataset` (one local MDS directory), with the parts the
streaming one is built from: `catalog` (streams and their indexes), `resolve` (user arguments
and the world into a plan config and read sizing), `session` (coordination and resume state on
the node) and `reference_api` (the reference's methods and properties); its rows are read by
`streaming.read.row_reader`.

The classes load lazily, so importing a part (e.g. `streaming.dataset.resolve`) does not import
torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "StreamingDataset": "streaming.dataset.streaming_dataset",
    "LocalDataset": "streaming.dataset.local_dataset",
    "clean_stale_shared_memory": "streaming.coord.shm",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.dataset' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
