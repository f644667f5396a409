"""`make demo` runs `python -m streaming.demo`: it finishes, reports the mix, resumes exactly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_demo_runs_end_to_end():
    done = subprocess.run([sys.executable, "-m", "streaming.demo", "--samples", "1500"],
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "shards" in out and "zstd bytes" in out
    assert "web 75.0%  code 25.0%" in out
    assert "continued        exactly" in out
