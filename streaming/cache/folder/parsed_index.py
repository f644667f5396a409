"""The parsed form of a cache folder's index.json, shared by the node's processes: the rank that
fetches and checks the index writes its columns beside it (`.index.json.<digest>.npz`, named
after the origin record's digest of the index text), and every process that then builds a
catalog over the folder loads those arrays instead of parsing the index again. The process that
fetched it keeps the parsed index itself, whatever its size or layout, and never parses it twice.

The form is used only while it describes the index.json now in the folder: same digest in the
origin record, same size, inode and modification time of the file. Anything else (a new fetch,
a damaged or foreign file) makes `load_form` return None and the index is parsed as usual.
Only indexes of at least MIN_INDEX_BYTES read by the vectorised scan have a form (their entries
are a template and columns); others are parsed by each process. Like index.json, the form is a
file in the folder and counts against a cache_limit (about a quarter of the index's size).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import zipfile
from pathlib import Path

import numpy as np

from streaming.format.index import DatasetIndex
from streaming.format.index_columns import Names, TemplateEntries
from streaming.format.index_fast import columnar_index
from streaming.util.atomic import staged_file
from streaming.util.confine import confine, remove

PREFIX = ".index.json."
SUFFIX = ".npz"
# Smaller indexes parse in milliseconds; their form would only take room under a cache_limit.
MIN_INDEX_BYTES = 1 << 20


def _name(digest: str) -> str:
    return f"{PREFIX}{digest}{SUFFIX}"


def _stamp(index: Path) -> list[int]:
    st = index.stat()
    return [st.st_size, st.st_ino, st.st_mtime_ns]


@dataclasses.dataclass(frozen=True)
class _Kept:
    """A folder's index as this process parsed it when it fetched it."""

    digest: str
    stamp: list[int]
    index: DatasetIndex


_KEPT: dict[str, _Kept] = {}  # by folder
_KEPT_LOCK = threading.Lock()


def save_form(folder: Path, digest: str, index: DatasetIndex) -> None:
    """Keep `index` (the folder's index.json, origin digest `digest`) for this process, and
    write its columns beside it, atomically, replacing older forms.

    Args:
        folder: the cache folder.
        digest: the origin record's digest of the index text.
        index: the parsed index.json of `folder`.
    """
    path = folder / "index.json"
    with _KEPT_LOCK:
        _KEPT[str(folder)] = _Kept(digest, _stamp(path),
                                   dataclasses.replace(index, source=str(path), root=folder))
    if not isinstance(index.shards, TemplateEntries) or (
            (folder / "index.json").stat().st_size < MIN_INDEX_BYTES):
        return
    entries = index.shards
    arrays: dict[str, np.ndarray] = {}
    paths = []
    for k, (path, column) in enumerate(entries.fields.items()):
        if isinstance(column, Names):
            arrays[f"b{k}"] = np.frombuffer(column.blob, np.uint8)
            arrays[f"o{k}"] = column.offsets
        else:
            arrays[f"i{k}"] = np.asarray(column, np.int64)
        paths.append([list(path), isinstance(column, Names)])
    meta = {"template": entries.template, "paths": paths, "count": len(entries),
            "extra": index.extra, "stamp": _stamp(folder / "index.json")}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    for old in _forms(folder):
        remove(folder, folder / old)
    with staged_file(confine(folder, folder / _name(digest))) as tmp, tmp.open("wb") as out:
        np.savez(out, **arrays)


def kept_index(folder: Path) -> DatasetIndex | None:
    """The folder's index.json as this process parsed it when it fetched it, while that is
    still the file there (None otherwise: another process fetched it, or it changed since).

    Args:
        folder: the cache folder.
    """
    with _KEPT_LOCK:
        kept = _KEPT.get(str(folder))
    if kept is None:
        return None
    with contextlib.suppress(OSError):
        if kept.stamp == _stamp(folder / "index.json"):
            return kept.index
    return None


def _forms(folder: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return [n for n in os.listdir(folder) if n.startswith(PREFIX) and n.endswith(SUFFIX)]
    return []


def load_form(folder: Path, digest: str | None) -> DatasetIndex | None:
    """The folder's index.json from its saved form, or None when there is none that describes
    the index.json there now (digest `digest`, the origin record's).

    Args:
        folder: the cache folder.
        digest: the origin record's digest of the index text (None: no record).
    """
    if digest is None:
        return None
    index = folder / "index.json"
    with _KEPT_LOCK:
        kept = _KEPT.get(str(folder))
    with contextlib.suppress(OSError):
        if kept is not None and kept.digest == digest and kept.stamp == _stamp(index):
            return kept.index
    try:
        with np.load(folder / _name(digest), allow_pickle=False) as data:
            meta = json.loads(data["meta"].tobytes())
            if meta["stamp"] != _stamp(index):
                return None
            fields: dict[tuple, Names | np.ndarray] = {}
            for k, (path, is_names) in enumerate(meta["paths"]):
                fields[tuple(path)] = (Names(data[f"b{k}"].tobytes(), data[f"o{k}"])
                                       if is_names else data[f"i{k}"])
        return columnar_index(meta["template"], fields, int(meta["count"]), meta["extra"],
                              source=str(index), root=folder)
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        return None
