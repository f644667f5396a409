"""Shared test settings: hypothesis profiles sized for a 2-core CI, and fixture locations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

REPO = Path(__file__).resolve().parent.parent
# A copy of ../shared/fixtures/mds-reference lives in tests/fixtures (unchanged bytes).
FIXTURES = REPO / "tests" / "fixtures" / "mds-reference"


@pytest.fixture(scope="session")
def reference_fixtures() -> Path:
    """The reference implementation's MDS datasets (read-only; never edit them)."""
    if not FIXTURES.is_dir():
        pytest.fail(f"reference fixtures not found at {FIXTURES}")
    return FIXTURES

# One moto S3 server process and the fault proxy factory for the whole suite.
from tests.support.faultproxy import fault_proxy  # noqa: E402, F401
from tests.support.s3server import s3_env, s3_server  # noqa: E402, F401


def _module_state(item: pytest.Item) -> bool:
    """Whether `item` uses a fixture that outlives one test and belongs to its module (module,
    class or package scope, or a session fixture the module defines itself)."""
    module = item.nodeid.split("::", 1)[0]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        for fixture in defs:
            if fixture.scope in ("module", "class", "package"):
                return True
            if fixture.scope == "session" and fixture.baseid == module:
                return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's `--dist loadgroup`, the tests of a module that share a fixture
    outliving one test run on one worker, so that fixture (a Ray cluster, a training run, a
    node of processes) is built once, not once per worker. A group a module names itself wins."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _module_state(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
