"""Compatibility path `streaming.base.dataloader` (see streaming/base/__init__.py)."""

from streaming.loader.dataloader import StreamingDataLoader

__all__ = ["StreamingDataLoader"]
