"""Compatibility layer: the module paths of the reference implementation (mosaicml-streaming),
so imports such as `from streaming.base import StreamingDataset` keep working.

Everything here is a re-export of this library's own classes and functions (plus a few argument
adapters where the reference's calling convention differs); see docs/from-reference-api.md.
New code should import from `streaming` directly.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "StreamingDataLoader": "streaming.loader",
    "StreamingDataset": "streaming.dataset",
    "Stream": "streaming.stream",
    "LocalDataset": "streaming.local",
    "MDSWriter": "writers.mds",
    "JSONWriter": "writers.split",
    "CSVWriter": "writers.split",
    "TSVWriter": "writers.split",
    "XSVWriter": "writers.split",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.base' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
