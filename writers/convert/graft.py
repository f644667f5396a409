"""`convert(..., mode="append" | "overwrite")`: convert into a staging folder as usual (resumable
when the output is local), then move or upload its parts beside the existing dataset under new
part numbers and publish the combined index last (writers/convert/parts.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from streaming.format.index import read_index
from streaming.storage import join, upload
from streaming.util.confine import confine
from writers.convert.parts import PartResult, PartsTarget, check_columns, publish_parts
from writers.growth import INDEX

STAGING = ".convert-staging"


def staging_folder(target: PartsTarget) -> tuple[Path, bool]:
    """Where the new parts are converted first, and whether it survives a failure (a local
    output keeps it inside the dataset folder, so running the same conversion again resumes)."""
    if target.remote:
        return Path(tempfile.mkdtemp(prefix="mds-convert-staging-")), False
    return Path(target.location) / STAGING, True


def _staged_parts(staged: Path) -> list[Path]:
    """The staged dataset's part folders, in the order its merged index lists them."""
    seen: list[str] = []
    for name in read_index(staged).basenames:
        part = name.split("/", 1)[0]
        if part not in seen:
            seen.append(part)
    return [staged / part for part in seen]


def _place(part: Path, target: PartsTarget, task: int) -> None:
    """Move (local) or upload (remote) one staged part folder to its new name."""
    destination = target.part(task)
    if not target.remote:
        confine(target.location, destination)
        if os.path.exists(destination):  # left by an earlier attempt that never published
            shutil.rmtree(destination)
        os.replace(part, destination)
        return
    for path in sorted(p for p in part.rglob("*") if p.is_file() and p.name != INDEX):
        upload(path, join(destination, path.relative_to(part).as_posix()))
    upload(part / INDEX, join(destination, INDEX))


def graft(target: PartsTarget, compression: str | None,
          convert_into: Callable[[Path], object]) -> str:
    """Run `convert_into(staging)`, check its columns against the dataset, place its parts and
    publish the index; returns the index path or URL."""
    staged, keep_on_failure = staging_folder(target)
    try:
        convert_into(staged)
        index = read_index(staged)
        if index.shards:
            check_columns(target, index.columns, compression)
        results = []
        for task, part in enumerate(_staged_parts(staged)):
            index_json = (part / INDEX).read_bytes()
            samples = read_index(part).num_samples
            _place(part, target, task)
            results.append(PartResult(task, samples, index_json))
        published = publish_parts(target, results)
    except BaseException:
        if not keep_on_failure:
            shutil.rmtree(staged, ignore_errors=True)
        raise
    shutil.rmtree(staged, ignore_errors=True)
    return published
