"""Shared test settings: hypothesis profiles sized for a 2-core CI, and fixture locations."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
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

@pytest.fixture(scope="module")
def fresh_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Path]:
    """A new empty folder on each call, for hypothesis examples: `tmp_path_factory.mktemp`
    lists the worker's base folder to number each new one, and that folder holds one entry per
    test run before, so a hundred examples would pay for thousands of listings."""
    base = tmp_path_factory.mktemp("examples")
    return lambda: Path(tempfile.mkdtemp(dir=base))

# One moto S3 server process and the fault proxy factory for the whole suite, and the small
# datasets several folders read.
from tests.support.datasets import ids_dataset, many_shards  # noqa: E402, F401
from tests.support.faultproxy import fault_proxy  # noqa: E402, F401
from tests.support.s3server import s3_env, s3_server  # noqa: E402, F401

# Under pytest-xdist every module's tests run on one worker, so a fixture the module keeps for
# all its tests (a Ray cluster, a training run, a node of processes) is built once. These
# modules also share a worker with each other: the jobs of many processes with deadlines never
# run side by side, and neither do two runs of the reference (it names its shared memory and
# /tmp locks after the first number no run on the machine holds).
SHARED_WORKER = {
    "tests/dataset/test_multiprocess.py": "process-jobs",
    "tests/dataset/test_node_scale.py": "process-jobs",
    "tests/parity/test_reference_parity.py": "reference",
    "tests/parity/test_reference_reads_checksums.py": "reference",
    "tests/dataset/test_reference_phrases.py": "reference",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's scheduler: whole modules (or SHARED_WORKER groups) per worker."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED_WORKER.get(module, module)

    return ModuleScheduling(config, log)
