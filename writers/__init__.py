"""Write side: a corpus into MDS shards plus index.json (locally, in parallel, on Spark, Ray or
Dask, to S3), and datasets that grow (append) or get replaced (overwrite)."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"MDSWriter": "writers.mds", "merge_index": "streaming.format.index",
         **dict.fromkeys(("JSONWriter", "CSVWriter", "TSVWriter", "XSVWriter"),
                         "writers.text_writers")}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'writers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
