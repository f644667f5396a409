"""Every code block of README.md and docs/*.md marked `<!-- test: run -->` runs as pasted: a
```python block with `python`, a ```bash block with `bash -e`, each in a fresh temporary folder
with the repository's venv first on PATH and this checkout importable. A block that cannot run
here stays unmarked (with a short comment saying why, where it is not obvious)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.helpers import MARKER, MarkerError, Snippet, documents, snippets

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60  # per block; keep blocks small (the whole file runs in about a minute)


def _venv_bin() -> Path:
    """The repository's venv (`make demo`/`make test` build .venv), else this interpreter's."""
    own = REPO / ".venv" / "bin"
    return own if (own / "python").exists() else Path(sys.executable).parent


def _all() -> list[Snippet]:
    return [s for path in documents(REPO) for s in snippets(path, REPO)]


def _run(snippet: Snippet, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ,
           "PATH": os.pathsep.join([str(_venv_bin()), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"}
    script = cwd / ("snippet.py" if snippet.language == "python" else "snippet.sh")
    script.write_text(snippet.code, encoding="utf-8")
    command = ["python", script.name] if snippet.language == "python" else \
        ["bash", "-e", "-o", "pipefail", script.name]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


@pytest.mark.parametrize("snippet", _all(), ids=lambda s: s.id)
def test_marked_block_runs(snippet: Snippet, tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    done = _run(snippet, work)
    assert done.returncode == 0, (f"{snippet.id} ({snippet.language}) exited with "
                                  f"{done.returncode}:\n{done.stdout[-2000:]}\n"
                                  f"{done.stderr[-3000:]}")


def test_markers_sit_right_above_a_block(tmp_path: Path) -> None:
    """A marker followed by anything but a python or bash fence would silently run nothing:
    collecting the repository's pages raises for one, and so does a misplaced one here."""
    assert _all(), "no block is marked runnable"
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text(f"{MARKER}\n\n```python\nprint(1)\n```\n")
    with pytest.raises(MarkerError, match=r"page\.md:1"):
        snippets(page, tmp_path)
    page.write_text(f"text\n{MARKER}\n```bash\necho hi\n```\n")
    assert [(s.id, s.language, s.code) for s in snippets(page, tmp_path)] == \
        [("docs/page.md:3", "bash", "echo hi\n")]
