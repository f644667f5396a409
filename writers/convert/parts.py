"""One MDS sub-dataset per task of a distributed engine (Spark, Ray, Dask), one index last.

Each task writes `out/part-NNNNN/` on its worker, numbered by the task's position, either into
a path every worker sees (one machine or a shared file system) or straight to a remote URL
(staged on the worker's disk, uploaded, the part's index last). A retried task rewrites its own
part folder, so a task that died half-way leaves no duplicate. The driver merges the parts'
indexes in task order and publishes the root index.json once, after every task succeeded: with
mode="append" after the existing shards, with mode="overwrite" in place of them (the replaced
files are deleted only afterwards).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.errors import OutputExistsError
from streaming.format.index import merge_index, read_index, write_index
from streaming.storage import backend_for, join
from streaming.storage.schemes import split_scheme
from streaming.util.atomic import atomic_write_bytes
from streaming.util.confine import confine
from writers.growth import (
    INDEX,
    Existing,
    check_compatible,
    check_mode,
    combined_document,
    read_existing,
    remove_files,
    stale_names,
)
from writers.shard_publish import shard_config


@dataclass(frozen=True)
class PartsTarget:
    """Where the parts of one distributed write go, picklable to every task.

    Args:
        location: the dataset folder: an absolute path, or a URL without a trailing slash.
        remote: whether `location` is a URL of an object store (parts are staged and uploaded).
        mode: "create", "append" or "overwrite".
        existing: the dataset already there (append and overwrite), else None.
        first_part: the number of the first new part folder (after the existing ones).
    """

    location: str
    remote: bool
    mode: str
    existing: Existing | None
    first_part: int

    def part_name(self, task: int) -> str:
        """The folder of task number `task` (0-based, in dataset order)."""
        return f"part-{self.first_part + task:05d}"

    def part(self, task: int) -> str:
        """The path or URL of task `task`'s part folder."""
        return join(self.location, self.part_name(task))


@dataclass(frozen=True)
class PartResult:
    """What one task wrote: its position, its sample count and its part's index.json bytes.

    Args:
        task: the task's 0-based position in dataset order.
        samples: samples written.
        index_json: the part's own index.json.
    """

    task: int
    samples: int
    index_json: bytes


def is_remote(out: str) -> bool:
    """Whether `out` is an object-store URL rather than a path or file:// URL."""
    return split_scheme(out)[0] not in ("", "file")


def prepare_target(out: str | os.PathLike, mode: str, who: str) -> PartsTarget:
    """Resolve `out` for `mode`: "create" refuses an existing dataset (a non-empty local
    folder), the other modes read the existing index; local folders are created."""
    check_mode(mode)
    text = os.fspath(out)
    remote = is_remote(text)
    location = text.rstrip("/") if remote else str(Path(backend_for(text)[1]).absolute())
    existing = read_existing(location) if mode != "create" else None
    if mode == "create":
        if remote:
            backend, path = backend_for(join(location, INDEX))
            if backend.exists(path):
                raise OutputExistsError(f"{who} output {join(location, INDEX)} exists; pass "
                                        "mode='append' or mode='overwrite'")
        elif Path(location).exists() and any(Path(location).iterdir()):
            raise OutputExistsError(f"{who} output {location} is not empty; pass "
                                    "mode='append' or mode='overwrite'")
    if not remote:
        Path(location).mkdir(parents=True, exist_ok=True)
    first = existing.next_part() if existing is not None else 0
    return PartsTarget(location, remote, mode, existing, first)


def check_columns(target: PartsTarget, columns: Mapping[str, str],
                  compression: str | None) -> None:
    """Before any task runs: DatasetMismatchError when appending other columns/compression."""
    if target.mode == "append" and target.existing is not None:
        names = sorted(columns)
        config = shard_config(names, [columns[n] for n in names], compression, [], None)
        check_compatible(target.existing, config)


def write_part(target: PartsTarget, task: int, columns: dict[str, str],
               samples: Iterable[dict], writer_args: Mapping[str, Any]) -> PartResult:
    """Write `samples` as the part of task `task` (replacing what an earlier attempt left)."""
    from writers.mds import MDSWriter

    location = target.part(task)
    args = dict(writer_args)
    if target.remote:
        args["exist_ok"] = True  # a retried task replaces its own part
    elif Path(location).exists():
        shutil.rmtree(confine(target.location, location))
    count = 0
    with MDSWriter(columns=columns, out=location, **args) as writer:
        for sample in samples:
            writer.write(sample)
            count += 1
    backend, path = backend_for(join(location, INDEX))
    return PartResult(task, count, backend.get(path))


def publish_parts(target: PartsTarget, results: Iterable[PartResult]) -> str:
    """Merge the parts' indexes in task order into the root index.json (combined with the
    existing shards when appending), publish it in one step, then (overwrite) delete the
    replaced files; returns the index's path or URL."""
    ordered = sorted(results, key=lambda r: r.task)
    with tempfile.TemporaryDirectory(prefix="mds-parts-merge-") as tmp:
        folders = []
        for result in ordered:
            folder = Path(tmp, target.part_name(result.task))
            folder.mkdir()
            (folder / INDEX).write_bytes(result.index_json)
            folders.append(folder)
        merged = merge_index(tmp, folders)
        new = read_index(merged)
        if target.mode == "append" and target.existing is not None:
            shards, extra = combined_document(target.existing, "append", new.shards, new.extra)
            merged = write_index(tmp, shards, extra)
        url = join(target.location, INDEX)
        if target.remote:
            backend, path = backend_for(url)
            backend.upload(merged, path)
        else:
            atomic_write_bytes(url, merged.read_bytes())
    if target.mode == "overwrite":
        kept = [f.name + "/" + INDEX for f in folders] + list(new.basenames) + [
            z for z in new.zip_basenames if z]
        remove_files(target.location, stale_names(target.existing, kept))
    return url
