"""Compatibility path `streaming.base.format.mds` (see streaming/base/__init__.py)."""

from writers.mds import MDSWriter

__all__ = ["MDSWriter"]
