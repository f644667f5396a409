"""Compatibility layer: the module paths of the reference implementation (mosaicml-streaming),
so imports such as `from streaming.base import StreamingDataset` keep working.

Everything here is a re-export of this library's own classes and functions (plus a few argument
adapters where the reference's calling convention differs); see docs/from-reference-api.md.
New code should import from `streaming` directly.
"""

from __future__ import annotations

from typing import Any

# Loaded lazily through `streaming`'s own table, so `import streaming.base` stays cheap.
__all__ = sorted((
    "StreamingDataLoader", "StreamingDataset", "Stream", "LocalDataset",
    "MDSWriter", "JSONWriter", "CSVWriter", "TSVWriter", "XSVWriter",
))


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'streaming.base' has no attribute {name!r}")
    import streaming

    value = getattr(streaming, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
