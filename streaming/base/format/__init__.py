"""Compatibility path `streaming.base.format`: the shard writers (see streaming/base)."""

from writers.mds import MDSWriter
from writers.text_writers import CSVWriter, JSONWriter, TSVWriter, XSVWriter

__all__ = ["CSVWriter", "JSONWriter", "MDSWriter", "TSVWriter", "XSVWriter"]
