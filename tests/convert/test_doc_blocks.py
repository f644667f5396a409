"""The runnable blocks of docs/converting.md and docs/cli.md (the line `<!-- test: run -->`
before the fence) run as pasted: a Python block as a script, a bash block through bash, each in
a fresh folder with this interpreter's bin folder first on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARK = "<!-- test: run -->"
DOCS = ("docs/converting.md", "docs/cli.md")

pytestmark = pytest.mark.slow


def marked_blocks() -> list:
    found = []
    for doc in DOCS:
        lines = (REPO / doc).read_text().split("\n")
        for i, line in enumerate(lines):
            if line.strip() != MARK:
                continue
            lang = lines[i + 1].strip().strip("`").strip()
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            found.append(pytest.param(lang, "\n".join(lines[i + 2:end]) + "\n",
                                      id=f"{doc}:{i + 2}"))
    return found


@pytest.mark.parametrize(("lang", "code"), marked_blocks())
def test_block_runs_as_pasted(lang: str, code: str, tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if lang == "python":
        (tmp_path / "snippet.py").write_text(code)
        command = [sys.executable, "snippet.py"]
    else:
        assert lang == "bash", lang
        command = ["bash", "-euo", "pipefail", "-c", code]
    ran = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=240)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-4000:]
