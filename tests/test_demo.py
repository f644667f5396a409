"""`make demo` runs `python -m streaming.cli.demo`: it finishes, reports the mix, resumes
exactly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_demo_runs_end_to_end():
    done = subprocess.run([sys.executable, "-m", "streaming.cli.demo", "--samples", "1500"],
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "shards" in out and "zstd bytes" in out
    web = float(re.search(r"shares\s+web ([0-9.]+)%", out).group(1))
    assert abs(web - 75.0) < 1.0  # exact up to the few samples that pad the last batch
    assert "continued        exactly" in out
