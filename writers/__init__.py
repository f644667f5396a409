"""Write side: a corpus into MDS shards plus index.json (locally, in parallel, on Spark, Ray or
Dask, to S3), and datasets that grow (append) or get replaced (overwrite)."""

from __future__ import annotations

from streaming.exports import lazy_exports

__all__ = ["CSVWriter", "JSONWriter", "MDSWriter", "TSVWriter", "XSVWriter", "merge_index"]

__getattr__, __dir__ = lazy_exports(globals())
