"""The local folder a shard writer fills: created when absent; a previous dataset in it is
replaced only when the caller passed exist_ok=True, and other files are left alone."""

from __future__ import annotations

import re
from pathlib import Path

from streaming.errors import OutputExistsError
from streaming.util.confine import remove


def prepare_directory(directory: Path, exist_ok: bool, own_file: re.Pattern[str],
                      writer: str) -> None:
    """Create `directory`, or clear the files of a previous dataset in it (names matching
    `own_file`) when `exist_ok` allows; `writer` names the writer in errors."""
    if directory.exists() and not directory.is_dir():
        raise OutputExistsError(f"{writer} output {directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()):
        if not exist_ok:
            raise OutputExistsError(
                f"Directory is not empty: {directory}: the {writer} output is not empty; pass "
                "exist_ok=True to replace it"
            )
        clear_files(directory, own_file)
    directory.mkdir(parents=True, exist_ok=True)


def clear_files(directory: Path, own_file: re.Pattern[str]) -> None:
    """Remove index.json, then every file of `directory` whose name matches `own_file` (the
    index first, so no moment exists where it names a removed shard); nothing else."""
    remove(directory, directory / "index.json")
    for path in directory.iterdir():
        if own_file.match(path.name):
            remove(directory, path)
