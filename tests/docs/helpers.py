"""The code blocks of README.md and docs/*.md marked runnable: the line `<!-- test: run -->`
immediately before a ```python or ```bash fence. Each block runs on its own (a fresh temporary
folder as its working directory), so each must hold everything it needs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKER = "<!-- test: run -->"
LANGUAGES = ("python", "bash")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")


@dataclass(frozen=True)
class Snippet:
    """One marked block.

    Args:
        path: the Markdown file, relative to the repository.
        line: the 1-based line of its opening fence.
        language: "python" or "bash".
        code: the block's text, without the fences (and without the fence's indentation).
    """

    path: str
    line: int
    language: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


class MarkerError(ValueError):
    """A marker that is not immediately before a python or bash block (it would run nothing)."""


def documents(repo: Path) -> list[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def snippets(path: Path, repo: Path) -> list[Snippet]:
    """The marked blocks of one Markdown file (MarkerError for a misplaced marker)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(repo).as_posix()
    found = []
    for i, text in enumerate(lines):
        if text.strip() != MARKER:
            continue
        fence = _FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None or fence.group(3) not in LANGUAGES:
            raise MarkerError(f"{name}:{i + 1}: {MARKER} must be on the line just before a "
                              f"```python or ```bash fence")
        indent, ticks = fence.group(1), fence.group(2)
        body = []
        for text_line in lines[i + 2:]:
            if text_line.strip() == ticks:
                break
            body.append(text_line[len(indent):] if text_line.startswith(indent) else text_line)
        else:
            raise MarkerError(f"{name}:{i + 2}: the marked block is never closed")
        found.append(Snippet(name, i + 2, fence.group(3), "\n".join(body) + "\n"))
    return found
