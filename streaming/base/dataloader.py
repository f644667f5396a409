"""Compatibility path `streaming.base.dataloader` (see streaming/base/__init__.py)."""

from streaming.loader import StreamingDataLoader

__all__ = ["StreamingDataLoader"]
