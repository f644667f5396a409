"""Compatibility path `streaming.base.stream` (see streaming/base/__init__.py)."""

from streaming.stream import Stream
from streaming.stream_registry import streams_registry

__all__ = ["Stream", "streams_registry"]
