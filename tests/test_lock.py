"""The test venv holds what requirements/test.lock says: `make test` installs only from the lock,
so a new release of a dependency cannot change what a clone of yesterday's main runs."""

from __future__ import annotations

import os
import re
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements" / "test.lock"
OURS = {"mds-streaming"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def _locked() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{LOCK.name}: {line!r} is not a `name==version` pin"
        pins[_canonical(name)] = version
    return pins


def _installed() -> dict[str, str]:
    """What pip installed into this venv: its site-packages only, not every folder on sys.path
    (Ray, once imported, puts its vendored `thirdparty_files` there, colorama among them)."""
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {_canonical(dist.metadata["Name"]): dist.version
            for dist in metadata.distributions(path=paths)}


def test_the_lock_pins_every_line_once():
    lines = [ln for ln in LOCK.read_text().splitlines() if ln and not ln.startswith("#")]
    assert len(_locked()) == len(lines)
    assert _locked()["torch"] == "2.13.0"


def test_installed_versions_are_the_locked_ones():
    locked = _locked()
    wrong = {name: (version, locked[name]) for name, version in _installed().items()
             if name in locked and _public(version) != locked[name]}
    assert not wrong, f"installed (version, locked) differ: {wrong}; run `make test` anew"


def test_ci_installs_nothing_outside_the_lock():
    if os.environ.get("CI") != "true":
        pytest.skip("a developer's venv may hold tools of their own; CI's holds only the lock")
    extra = sorted(set(_installed()) - set(_locked()) - OURS)
    assert not extra, f"installed but not in {LOCK.name}: {extra}; add them with `make lock`"
