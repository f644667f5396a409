"""CLI tests run `python -m streaming.cli` in a subprocess, exactly as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.s3server import s3_env, s3_server  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


class Ran:
    """Exit code and output of one CLI run."""

    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code, self.out, self.err = proc.returncode, proc.stdout, proc.stderr

    def json(self):
        return json.loads(self.out)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None,
            timeout: float = 120) -> Ran:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "streaming.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=environ, timeout=timeout)
    return Ran(proc)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small JSONL file with text, numbers and token lists."""
    path = tmp_path / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(600):
            text = f"sample {i} ✓" * (i % 5 + 1)
            row = {"id": i, "text": text, "tokens": list(range(i % 30 + 1))}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
