"""Running Composer and llm-foundry in tests: the stand-ins they need on the path, and a skip
(a failure under CI=true) when `make clients` has not installed them.

`STANDINS` (tests/support/standins) holds the torchvision and pkg_resources stand-ins (see their
docstrings); it goes first on sys.path, in this process and in every process a test starts.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

STANDINS = Path(__file__).resolve().parents[1] / "support" / "standins"
REPO = Path(__file__).resolve().parents[2]


def use_standins() -> None:
    """Put the stand-ins first on this process's path (before Composer is imported)."""
    if str(STANDINS) not in sys.path:
        sys.path.insert(0, str(STANDINS))


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a process that imports Composer or llm-foundry: this checkout's
    `streaming` and the stand-ins first on PYTHONPATH.

    Args:
        extra: Variables to add or replace.
    """
    env = dict(os.environ)
    parts = [str(REPO), str(STANDINS), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    env.update(extra)
    return env


def require(*modules: str) -> None:
    """Skip unless `modules` import (installed by `make clients`); under CI=true, fail instead.

    Args:
        modules: Top-level module names, e.g. "composer", "llmfoundry".
    """
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    why = f"{', '.join(missing)} not installed: run `make clients`"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {why}")
    pytest.skip(why)
