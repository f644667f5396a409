"""The names this library exports lazily, and the module each is imported from at first use:
one table for `streaming`, `streaming.dataset`, the reference's `streaming.base` and `writers`,
each of which exports the part of it its `__all__` names. Lazy, so `import streaming` (or
`from streaming import MDSWriter`) does not import torch until a dataset is built."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

EXPORTS = {
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


def lazy_exports(namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package exporting `namespace["__all__"]` (names of
    `EXPORTS`): a name is imported from its module at first use, then kept in `namespace`.

    Args:
        namespace: the package's globals (its `__name__` and `__all__`).
    """
    package, names = namespace["__name__"], frozenset(namespace["__all__"])
    unknown = sorted(names - EXPORTS.keys())
    if unknown:
        raise AttributeError(f"{package} exports {unknown}, which streaming.exports lacks")

    def attribute(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(EXPORTS[name]), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted(set(namespace) | names)

    return attribute, listing
