"""Compatibility path `streaming.base.stream` (see streaming/base/__init__.py)."""

from streaming.base.stream_registry import streams_registry
from streaming.stream import Stream

__all__ = ["Stream", "streams_registry"]
