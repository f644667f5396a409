"""Helpers shared by the subcommands: errors, help formatting, opening indexes by path or URL."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from textwrap import dedent

from streaming.errors import IndexFileError, ObjectTooLargeError
from streaming.format.index import DatasetIndex, parse_index, read_index
from streaming.format.index_bounds import max_index_bytes, too_big
from streaming.storage import backend_for, join
from streaming.storage.schemes import split_scheme
from streaming.util.quantities import human_bytes  # noqa: F401  (the subcommands' import)


class UserError(Exception):
    """Wrong arguments or input: printed as one line, exit code 2."""


class CommandFailed(Exception):
    """The command ran but found a problem (e.g. corrupt shards): exit code 1."""


def add_command(sub, name: str, summary: str, examples: str) -> argparse.ArgumentParser:
    """A subparser whose --help ends with worked examples."""
    return sub.add_parser(
        name, help=summary, description=summary,
        epilog="examples:\n" + dedent(examples).strip("\n"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def is_remote(location: str) -> bool:
    return bool(split_scheme(location)[0]) and not location.startswith("file:")


def open_index(location: str) -> DatasetIndex:
    """The index of a dataset folder, index.json path or URL (s3://bucket/prefix)."""
    if not is_remote(location):
        path = Path(location.removeprefix("file://"))
        return read_index(path if path.name == "index.json" else path / "index.json")
    url = location if location.endswith("index.json") else join(location, "index.json")
    backend, key = backend_for(url)
    try:
        data = backend.get(key, max_size=max_index_bytes())
    except ObjectTooLargeError as exc:
        raise IndexFileError(f"{exc}: {too_big(url)}") from exc
    return parse_index(data, source=url)


def dataset_root(location: str) -> str:
    """The folder or URL prefix that basenames in the index are relative to."""
    trimmed = location.removesuffix("/index.json") if location.endswith("/index.json") else location
    if not is_remote(trimmed):
        path = Path(trimmed.removeprefix("file://"))
        return str(path.parent if path.name == "index.json" else path)
    return trimmed


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="streaming-cli-")
