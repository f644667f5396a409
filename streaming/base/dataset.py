"""Compatibility path `streaming.base.dataset` (see streaming/base/__init__.py)."""

from streaming.coord.shm import clean_stale_shared_memory
from streaming.dataset.streaming_dataset import StreamingDataset

__all__ = ["StreamingDataset", "clean_stale_shared_memory"]
