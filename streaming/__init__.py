"""Sharded streaming datasets in the MDS format.

Heavy pieces are imported lazily so `import streaming` stays cheap and `from streaming import
MDSWriter` works without pulling in torch until a dataset is built.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "MDSWriter": "writers.mds",
    "JSONWriter": "writers.text_writers",
    "CSVWriter": "writers.text_writers",
    "TSVWriter": "writers.text_writers",
    "XSVWriter": "writers.text_writers",
    "LocalDataset": "streaming.dataset.local_dataset",
    "StreamingDataset": "streaming.dataset.streaming_dataset",
    "Stream": "streaming.stream",
    "StreamingDataLoader": "streaming.loader.dataloader",
    "merge_index": "streaming.format.index",
    "clean_stale_shared_memory": "streaming.coord.shm",
    "PackedDataset": "streaming.packing.precomputed",
    "PackedStreamingDataset": "streaming.packing.streaming",
    "load_lengths": "streaming.dataset.lengths",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
