"""Converters: JSONL, CSV/TSV, Parquet, Hugging Face datasets, Spark and Python iterables -> MDS."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "convert": "writers.convert.api",
    "detect_format": "writers.convert.api",
    "infer_columns": "writers.convert.infer",
    "dataframe_to_mds": "writers.convert.spark",
    "tokenize": "writers.convert.transforms",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'writers.convert' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
