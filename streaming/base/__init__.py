"""Compatibility layer: the module paths of the reference implementation (mosaicml-streaming),
so imports such as `from streaming.base import StreamingDataset` keep working.

Everything here is a re-export of this library's own classes and functions (plus a few argument
adapters where the reference's calling convention differs); see docs/from-reference-api.md.
New code should import from `streaming` directly.
"""

from __future__ import annotations

from streaming.exports import lazy_exports

__all__ = sorted((
    "StreamingDataLoader", "StreamingDataset", "Stream", "LocalDataset",
    "MDSWriter", "JSONWriter", "CSVWriter", "TSVWriter", "XSVWriter",
))

__getattr__, __dir__ = lazy_exports(globals())
