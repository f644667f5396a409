"""Datasets that grow or get replaced: the `mode` of MDSWriter and of the conversion helpers.

- "create": the output holds no dataset yet (or `exist_ok` lets the writer clear it first).
- "append": new shards join the existing ones under names numbered after the highest existing
  shard or part, so no file a reader of the old index uses is touched; the combined index is
  published last, in one step.
- "overwrite": the new shards are written beside the old ones under fresh names, the new index
  replaces the old one in one step, and only then are the old files deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.errors import (
    ArgumentError,
    DatasetMismatchError,
    IndexNotFoundError,
    ObjectNotFoundError,
)
from streaming.format.index import LENGTHS_KEY, parse_index
from streaming.storage import backend_for, join
from streaming.util.confine import remove

MODES = ("create", "append", "overwrite")
INDEX = "index.json"
_ROOT_SHARD = re.compile(r"^shard\.(\d+)\.mds")
_PART = re.compile(r"^part-?(\d+)/")
_FILE_KEYS = ("raw_data", "zip_data", "raw_meta", "zip_meta")


def check_mode(mode: str) -> str:
    """`mode` if it is one of MODES, else ArgumentError naming the choices."""
    if mode not in MODES:
        raise ArgumentError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


@dataclass(frozen=True)
class Existing:
    """The dataset already at an output: its shard entries and other top-level index keys.

    Args:
        location: the dataset folder (a path or a URL).
        shards: the index's shard entries, in order.
        extra: the index's top-level keys besides `shards` and `version`.
    """

    location: str
    shards: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)

    def next_shard(self) -> int:
        """The first free number for a shard written at the dataset's root."""
        numbers = [int(m.group(1)) for name in self.basenames()
                   if (m := _ROOT_SHARD.match(name))]
        return max(numbers, default=-1) + 1

    def next_part(self) -> int:
        """The first free number for a part folder (`part-NNNNN/`)."""
        numbers = [int(m.group(1)) for name in self.basenames() if (m := _PART.match(name))]
        return max(numbers, default=-1) + 1

    def basenames(self) -> list[str]:
        """Every file the index names: shards, their compressed copies, meta and side files."""
        names = [shard[key]["basename"] for shard in self.shards for key in _FILE_KEYS
                 if isinstance(shard.get(key), dict)]
        spec = self.extra.get(LENGTHS_KEY)
        if isinstance(spec, dict):
            names += [f["basename"] for f in spec.get("files", []) if isinstance(f, dict)]
        return names


def read_existing(location: str | os.PathLike) -> Existing | None:
    """The dataset at `location` (folder path or URL), or None when it has no index.json."""
    text = os.fspath(location).rstrip("/")
    backend, path = backend_for(join(text, INDEX))
    try:
        data = backend.get(path)
    except (ObjectNotFoundError, FileNotFoundError, IndexNotFoundError):
        return None
    parsed = parse_index(data, source=join(text, INDEX), root=Path("/"))
    return Existing(text, list(parsed.shards), dict(parsed.extra))


def existing_dataset(mode: str, location: str | os.PathLike,
                     config: dict[str, Any]) -> Existing | None:
    """The dataset a writer in `mode` builds on (None for "create" or where there is none);
    when appending, checked against the writer's shard `config` (check_compatible)."""
    if mode == "create":
        return None
    existing = read_existing(location)
    if existing is not None and mode == "append":
        check_compatible(existing, config)
    return existing


def check_compatible(existing: Existing, config: dict[str, Any]) -> None:
    """DatasetMismatchError naming the difference when `config` (a shard config: column names,
    encodings, compression) cannot join the shards of `existing`."""
    mine = dict(zip(config["column_names"], config["column_encodings"]))
    for shard in existing.shards:
        theirs = dict(zip(shard["column_names"], shard["column_encodings"]))
        problems = _column_differences(theirs, mine)
        if shard.get("compression") != config["compression"]:
            problems.append(f"compression is {shard.get('compression')!r} there, "
                            f"{config['compression']!r} here")
        if problems:
            raise DatasetMismatchError(
                f"cannot add shards to {existing.location}: {'; '.join(problems)} (shard "
                f"{shard['raw_data']['basename']}); write with the dataset's own columns and "
                "compression, or use mode='overwrite'")


def _column_differences(theirs: dict[str, str], mine: dict[str, str]) -> list[str]:
    out = [f"column {name!r} is {theirs[name]!r} there, {mine[name]!r} here"
           for name in theirs if name in mine and theirs[name] != mine[name]]
    out += [f"column {name!r} only in the dataset" for name in theirs if name not in mine]
    out += [f"column {name!r} only in the new shards" for name in mine if name not in theirs]
    return out


def combined_document(existing: Existing | None, mode: str, shards: Sequence[dict[str, Any]],
                      extra: dict[str, Any] | None) -> tuple[list[dict[str, Any]], dict]:
    """The (shards, extra keys) of the index to publish: the new ones alone, or, when
    appending, the existing ones followed by the new ones (sample-length side files are kept
    when both sides record them alike)."""
    if mode != "append" or existing is None:
        return list(shards), dict(extra or {})
    merged = {k: v for k, v in existing.extra.items() if k != LENGTHS_KEY}
    old, new = existing.extra.get(LENGTHS_KEY), (extra or {}).get(LENGTHS_KEY)
    if isinstance(old, dict) and isinstance(new, dict) and _spec_head(old) == _spec_head(new):
        merged[LENGTHS_KEY] = {**old, "files": list(old["files"]) + list(new["files"])}
    elif not existing.shards and new is not None:
        merged[LENGTHS_KEY] = new
    return [*existing.shards, *shards], merged


def _spec_head(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "files"}


def stale_names(existing: Existing | None, kept: list[str]) -> list[str]:
    """Files of the replaced dataset that the new index does not name (overwrite removes them
    after publishing), plus each old part folder's own index.json."""
    if existing is None:
        return []
    keep = set(kept)
    names = [n for n in existing.basenames() if n not in keep]
    parts = sorted({n.split("/", 1)[0] for n in names if "/" in n})
    return names + [f"{part}/{INDEX}" for part in parts if f"{part}/{INDEX}" not in keep]


def remove_files(location: str, names: list[str]) -> None:
    """Delete `names` (relative to the dataset folder `location`, as validated index basenames)
    and then the local part folders they leave empty."""
    backend, root = backend_for(location)
    local = os.path.isdir(root)
    for name in names:
        if local:  # through the folder's guard: a symbolic link never leads a removal out
            remove(root, os.path.join(root, name))
            continue
        backend, path = backend_for(join(location, name))
        backend.delete(path)
    if local:
        for folder in sorted({n.rsplit("/", 1)[0] for n in names if "/" in n}, reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(root, folder))
