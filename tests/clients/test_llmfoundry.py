"""llm-foundry's text and finetuning loaders, StreamingTextDataset and its curriculum callback
over this project's `streaming` (llmfoundry_checks.py, run in a child pytest: llm-foundry imports
Composer, which needs the torchvision stand-in of tests/support/standins on its path)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.helpers import REPO, child_env, require

CHECKS = Path(__file__).with_name("llmfoundry_checks.py")


@pytest.mark.slow
def test_llm_foundry_builds_and_trains_on_our_datasets(tmp_path) -> None:
    require("composer", "llmfoundry")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
            str(tmp_path), str(CHECKS)]
    proc = subprocess.Popen(argv, cwd=REPO, env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"llm-foundry checks did not finish in 400s:\n{out[-6000:]}")
    assert proc.returncode == 0, out[-8000:]
