"""No tracked text file keeps a merge's conflict markers (one sat in docs/dataset.md's Stream
signature, shown to every reader, until this test)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^(<{7}|>{7})( |$)", re.M)


def test_no_file_holds_a_conflict_marker() -> None:
    files = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.toml", "*.txt", "*.yaml",
                            "*.cfg", "Makefile"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    marked = [name for name in files
              if (ROOT / name).is_file() and MARKER.search((ROOT / name).read_text())]
    assert marked == []
