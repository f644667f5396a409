"""STREAMING_METRICS_EVERY=N shows a summary every N batches in a script that configured no
logging; a user's own logging set-up is used instead (each line once), and a level set on the
`streaming.metrics` logger silences it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.datasets import write_ids

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging, sys
{setup}
from streaming import StreamingDataLoader, StreamingDataset
ds = StreamingDataset(local=sys.argv[1], batch_size=10)
for _ in StreamingDataLoader(ds, batch_size=10, num_workers=0):
    pass
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_ids(tmp_path_factory.mktemp("shown") / "ids", 500)


def _run(folder: Path, setup: str, every: str = "20") -> subprocess.CompletedProcess:
    env = {**os.environ, "STREAMING_METRICS_EVERY": every,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    code = textwrap.dedent(SCRIPT).format(setup=setup)
    return subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                          text=True, timeout=120, env=env)


def _summaries(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in (done.stdout + done.stderr).splitlines() if "loader: " in line]


def test_summaries_show_without_any_logging_configured(folder):
    lines = _summaries(_run(folder, ""))
    assert len(lines) == 50 // 20
    assert "streaming.metrics: loader: 20 batches" in lines[0]


def test_a_configured_root_logger_shows_each_summary_once(folder):
    lines = _summaries(_run(folder, "logging.basicConfig(level=logging.WARNING, "
                                    "format='ROOT %(message)s')"))
    assert lines == [line for line in lines if line.startswith("ROOT loader: ")]
    assert len(lines) == 2


def test_a_level_set_on_the_metrics_logger_silences_it(folder):
    assert _summaries(_run(folder, "logging.getLogger('streaming.metrics')"
                                   ".setLevel(logging.WARNING)")) == []


def test_nothing_shows_without_the_variable(folder):
    assert _summaries(_run(folder, "", every="")) == []
