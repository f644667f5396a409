"""A stand-in for setuptools' pkg_resources, on sys.path only for the tests that import
llm-foundry: its environment-logging callback imports `pkg_resources` (which setuptools no longer
ships) to read package versions. This answers that one question from importlib.metadata."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata


class DistributionNotFound(Exception):
    """No installed distribution of that name."""


@dataclass(frozen=True)
class Distribution:
    """An installed distribution's name and version.

    Args:
        project_name: The distribution name.
        version: Its installed version.
    """

    project_name: str
    version: str


def get_distribution(name: str) -> Distribution:
    """The installed distribution `name`.

    Args:
        name: A distribution name.
    """
    try:
        return Distribution(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        raise DistributionNotFound(name) from None
