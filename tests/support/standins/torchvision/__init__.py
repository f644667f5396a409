"""A stand-in for torchvision, on sys.path only for the tests that import Composer.

Composer imports `torchvision.transforms` and `torchvision.datasets.VisionDataset` when it starts,
and torchmetrics (which Composer imports) pulls names from `torchvision.models` and
`torchvision.ops` once it finds a module called torchvision. The torchvision wheel on the package
index is a CUDA build whose C++ operators do not load beside the CPU torch this project tests
with, so these tests put this package first on the path instead. Every name resolves to a
placeholder that raises when used: nothing the tests run touches vision code.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__version__ = "0.0.0+standin"

_SUBMODULES = ("datasets", "io", "models", "ops", "transforms", "utils")


class StandInUnavailable(NotImplementedError):
    """Raised by every placeholder: the stand-in has no vision code."""


class _Placeholder(type):
    """Metaclass of the placeholders: any attribute of one is another placeholder (transformers
    reads enum members such as `InterpolationMode.BILINEAR` when it finds torchvision)."""

    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(f"{cls.__module__}.{cls.__name__}", name)


def placeholder(module: str, name: str) -> type:
    """A class named `name` that can be imported, subclassed and read but refuses to be built.

    Args:
        module: The stand-in module the name was asked of.
        name: The attribute name.
    """

    def refuse(*args: object, **kwargs: object) -> None:
        raise StandInUnavailable(f"{module}.{name} is a test stand-in (tests/support/standins)")

    return _Placeholder(name, (), {"__init__": refuse, "__module__": module})


def __getattr__(name: str) -> ModuleType | type:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("__"):
        raise AttributeError(name)
    return placeholder(__name__, name)
