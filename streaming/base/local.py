"""Compatibility path `streaming.base.local` (see streaming/base/__init__.py)."""

from streaming.dataset.local_dataset import LocalDataset

__all__ = ["LocalDataset"]
