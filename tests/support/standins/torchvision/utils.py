"""Part of the torchvision stand-in (see torchvision/__init__.py): every name is a placeholder."""

from __future__ import annotations

from torchvision import placeholder


def __getattr__(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return placeholder(__name__, name)
