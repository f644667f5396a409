"""Compatibility path `streaming.base.local` (see streaming/base/__init__.py)."""

from streaming.local import LocalDataset

__all__ = ["LocalDataset"]
