"""`index.json` of MDS v2: strict parsing into compact numpy arrays, atomic writing, merging.

Parsing checks everything a reader later trusts (counts, byte sizes, encodings, codecs and that
every basename stays inside the dataset folder) so that errors name the file and the shard up
front instead of surfacing as odd failures mid-epoch.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import (
    ArgumentError,
    IndexFileError,
    IndexJSONError,
    IndexNotFoundError,
)
from streaming.format.index_bounds import max_index_bytes, too_big
from streaming.format.index_columns import Digests, Names
from streaming.format.index_entries import (
    INDEX_VERSION,
    LENGTHS_KEY,
    check_basename,
    fail,
)
from streaming.format.index_fast import fast_index
from streaming.format.index_model import DatasetIndex
from streaming.format.index_shard import (
    SUPPORTED_FORMATS,
    check_document,
    check_mds_shard,
    max_samples,
)
from streaming.format.parquet_index import check_parquet_shard
from streaming.format.rows import ROW_FORMATS, RowCodec
from streaming.format.text_shard_index import check_text_shard
from streaming.util.atomic import atomic_write_bytes
from streaming.util.disk_full import naming_full_disk

__all__ = [
    "INDEX_NAME",
    "LENGTHS_KEY",
    "SUPPORTED_FORMATS",
    "DatasetIndex",
    "index_bytes",
    "lengths_key",
    "max_samples",
    "merge_index",
    "parse_index",
    "read_index",
    "write_index",
]

INDEX_NAME = "index.json"
# Bytes of index text from which the vectorised scan is the faster reading: its numpy calls
# cost the same whatever the size, while the `json` path grows with the text and only catches
# up at a few tens of KB, about a hundred shards (docs/distributed.md, "Parsing").
SCAN_FROM = 32 << 10
LENGTHS_SUFFIX = ".lengths"
LENGTHS_DTYPE = "<u4"


def lengths_key(column: str | None, files: Sequence[dict[str, Any]],
                function: str | None = None) -> dict[str, Any]:
    """The top-level index key that records sample lengths: one side file per shard.

    Args:
        column: the column whose lengths the files hold (None: a function's).
        files: each shard's side-file entry (basename, bytes, hashes), in index order.
        function: the qualified name of the function that measured them, if any.
    """
    spec: dict[str, Any] = {"column": column, "dtype": LENGTHS_DTYPE, "suffix": LENGTHS_SUFFIX,
                            "files": list(files)}
    if function is not None:
        spec["function"] = function
    return {LENGTHS_KEY: spec}


def parse_index(
    data: bytes | str | dict, *, source: str, root: Path | None = None
) -> DatasetIndex:
    """Validate an index.json document (text or already-parsed) into a DatasetIndex.

    Text of SCAN_FROM bytes or more whose shard entries share one layout is read by a
    vectorised scan (no object per shard); any other document, and any document the scan finds
    a fault in, goes through the checked `json` path, which names the fault.

    Args:
        data: the document's bytes or text, or the parsed document.
        source: the index's path or URL (for error messages).
        root: the folder basenames are relative to.
    """
    if isinstance(data, str):
        data = data.encode() if data.isascii() else data
    if isinstance(data, (bytes, str)) and len(data) > max_index_bytes():
        raise IndexFileError(too_big(source, len(data)))
    if isinstance(data, bytes) and len(data) >= SCAN_FROM:
        found = fast_index(data, source=source, root=root)
        if found is not None:
            return _no_file_is_a_folder(found)
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IndexJSONError(f"Index file at {source} is empty or corrupted: not valid "
                                 f"JSON (truncated?): {exc}",
                                 getattr(exc, "doc", ""), getattr(exc, "pos", 0)) from None
        except RecursionError:
            raise IndexJSONError(f"{source}: nested too deeply to be an index", "", 0) from None
    shards = check_document(data, source)
    return _no_file_is_a_folder(_checked_entries(data, shards, source, root))


def _no_file_is_a_folder(index: DatasetIndex) -> DatasetIndex:
    """`index`, once no file it names (`a`) is also a folder of another (`a/b`): both could
    not be on disk at once."""
    columns = (index.basenames, index.zip_basenames)
    if not any(b"/" in names.blob for names in columns):
        return index
    files = {name for names in columns for name in names if name}
    for name in files:
        parts = name.split("/")
        for k in range(1, len(parts)):
            folder = "/".join(parts[:k])
            if folder in files:
                raise fail(index.source, f"file {name!r}",
                           f"its folder {folder!r} is also named as a file")
    return index


def _checked_entries(data: dict, shards: list, source: str, root: Path | None) -> DatasetIndex:
    """The checked `json` path: every entry checked on its own."""
    count = len(shards)
    samples = np.zeros(count, np.int64)
    raw_bytes = np.zeros(count, np.int64)
    zip_bytes = np.zeros(count, np.int64)
    basenames: list[str] = []
    zip_basenames: list[str | None] = []
    first: tuple[dict, RowCodec | None] = ({}, None)
    schemas: set[tuple] = set()
    row_codecs: dict[tuple, RowCodec] = {}
    named: dict[str | None, int] = {}  # file name -> the shard that names it
    for i, shard in enumerate(shards):
        fmt = shard.get("format") if isinstance(shard, dict) else None
        if fmt in ROW_FORMATS or fmt == "parquet":
            check = check_parquet_shard if fmt == "parquet" else check_text_shard
            checked = check(shard, i, source, row_codecs)
            schema = checked.codec.columns
        else:
            checked = check_mds_shard(shard, i, source, schemas)
            schema = dict(zip(shard["column_names"], shard["column_encodings"]))
        codec, raw_name, raw_size = checked.codec, checked.raw_name, checked.raw_size
        zip_name, zip_size = checked.zip_name, checked.zip_size
        first = (schema, codec) if i == 0 else first
        _same_layout(first, (schema, codec), fmt, source, f"shard {i} ({raw_name})")
        for name in (raw_name, zip_name):
            if name is not None and name in named:
                raise fail(source, f"shard {i} ({raw_name})",
                           f"file {name!r} is also named by shard {named[name]}")
            named[name] = i
        samples[i] = shard["samples"]
        raw_bytes[i], zip_bytes[i] = raw_size, zip_size
        basenames.append(raw_name)
        zip_basenames.append(zip_name)
    _check_side_files(data.get(LENGTHS_KEY), named, source)
    return DatasetIndex(
        shards=shards, samples_per_shard=samples, raw_bytes=raw_bytes, zip_bytes=zip_bytes,
        basenames=Names.of(basenames), zip_basenames=Names.of(zip_basenames),
        compression=Names.of([shard["compression"] for shard in shards]),
        raw_hashes=Digests.of([shard["raw_data"].get("hashes") or {} for shard in shards]),
        zip_hashes=Digests.of([(shard["zip_data"] or {}).get("hashes") or {}
                               for shard in shards]),
        columns=first[0], source=source, root=root,
        extra={k: v for k, v in data.items() if k not in ("shards", "version")},
        row_codec=first[1],
    )


def _same_layout(first: tuple[dict, RowCodec | None], this: tuple[dict, RowCodec | None],
                 fmt: Any, source: str, where: str) -> None:
    """A shard's format and columns are shard 0's: one index holds one layout."""
    (columns, row_codec), (schema, codec) = first, this
    if codec != row_codec:
        raise fail(source, where,
                   f"format {fmt!r} ({codec}) differs from shard 0's "
                   f"({row_codec or 'mds'}): one index holds one format")
    if schema != columns or list(schema) != list(columns):
        raise fail(source, where, f"columns {schema} differ from shard 0's {columns}")


def _check_side_files(spec: Any, named: dict[str | None, int], source: str) -> None:
    """The names of the per-shard side files an index lists (sample lengths) are checked like
    shard names, and may not name a shard's file or each other; their other fields are checked
    where they are read."""
    files = spec.get("files") if isinstance(spec, dict) else None
    for i, entry in enumerate(files if isinstance(files, list) else []):
        if not isinstance(entry, dict) or "basename" not in entry:
            continue
        where = f"{LENGTHS_KEY} file {i}"
        name = check_basename(entry["basename"], source=source, where=where)
        if name in named:
            raise fail(source, where, f"file {name!r} is also named by shard {named[name]}")
        named[name] = i


def _index_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path / INDEX_NAME if path.is_dir() else path


def read_index(path: str | os.PathLike, *, root: Path | None = None) -> DatasetIndex:
    """Read and validate `path` (an index.json or the folder holding it).

    `root` is the folder basenames are relative to (default: the index's folder).
    """
    file = _index_path(path)
    try:
        size = file.stat().st_size
        if size > max_index_bytes():
            raise IndexFileError(too_big(str(file), size))
        data = file.read_bytes()
    except FileNotFoundError:
        raise IndexNotFoundError(f"{file}: index file not found: it does not exist") from None
    except OSError as exc:
        raise IndexFileError(f"{file}: cannot read index: {exc}") from exc
    return parse_index(data, source=str(file), root=Path(root) if root else file.parent)


def index_bytes(shards: Sequence[dict], extra: dict[str, Any] | None = None) -> bytes:
    """index.json bytes exactly as the reference writer lays them out (sorted keys, one line).

    `extra` adds top-level keys, the one place reference readers ignore unknown keys.
    """
    document = {**(extra or {}), "shards": list(shards), "version": INDEX_VERSION}
    if extra and {"shards", "version"} & set(extra):
        raise ArgumentError("extra index keys cannot replace 'shards' or 'version'")
    return json.dumps(document, sort_keys=True).encode()


def write_index(
    directory: str | os.PathLike, shards: Sequence[dict], extra: dict[str, Any] | None = None
) -> Path:
    """Write `directory/index.json` for `shards` atomically (temp file, fsync, rename)."""
    path, data = Path(directory) / INDEX_NAME, index_bytes(shards, extra)
    with naming_full_disk(path, len(data)):
        return atomic_write_bytes(path, data)


def _natural_key(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _find_parts(out: Path) -> list[Path]:
    found = [p.parent for p in out.glob(f"*/{INDEX_NAME}")]
    return sorted(found, key=lambda p: _natural_key(p.name))


def _prefixed(entry: dict | None, prefix: str) -> dict | None:
    if entry is None:
        return None
    entry = dict(entry)
    entry["basename"] = f"{prefix}/{entry['basename']}"
    return entry


def merge_index(
    out: str | os.PathLike, parts: list[str | os.PathLike] | None = None
) -> Path:
    """Join sub-datasets of `out` into `out/index.json` (basenames get the subfolder prefix).

    With `parts=None`, every `out/*/index.json` is used, in natural order (part2 before part10).

    Args:
        out: The local folder holding the sub-datasets; the merged index.json goes here.
        parts: Sub-dataset folders (or their index.json files) inside `out`, in order (the
            reference's `index_file_urls`, which it takes first: `streaming.base.util.
            merge_index` takes that order); None: found as above.
    """
    out = Path(out)
    folders = _find_parts(out) if parts is None else [_index_path(p).parent for p in parts]
    if not folders:
        raise IndexNotFoundError(f"{out}: no sub-dataset index.json files to merge")
    merged: list[dict] = []
    lengths: list[dict | None] = []
    for folder in folders:
        try:
            prefix = folder.resolve().relative_to(out.resolve()).as_posix()
        except ValueError:
            raise IndexFileError(f"{folder}: sub-dataset is not inside {out}") from None
        if prefix == ".":
            raise IndexFileError(f"{folder}: a sub-dataset cannot be {out} itself")
        part = read_index(folder)
        for shard in part.shards:
            shard = copy.copy(shard)
            shard["raw_data"] = _prefixed(shard["raw_data"], prefix)
            shard["zip_data"] = _prefixed(shard["zip_data"], prefix)
            for key in ("raw_meta", "zip_meta"):  # text shards' meta files
                if key in shard:
                    shard[key] = _prefixed(shard[key], prefix)
            merged.append(shard)
        spec = part.extra.get(LENGTHS_KEY)
        ok = isinstance(spec, dict) and isinstance(spec.get("files"), list) and all(
            isinstance(f, dict) and "basename" in f for f in spec["files"])
        lengths.append({**spec, "files": [_prefixed(f, prefix) for f in spec["files"]]}
                       if ok else None)
    parse_index({"shards": merged, "version": INDEX_VERSION}, source=str(out / INDEX_NAME))
    # The reference merger puts "version" first; keep that so merged files match byte for byte.
    document: dict[str, Any] = {"version": INDEX_VERSION, "shards": merged}
    document.update(_merged_lengths(lengths))
    text = json.dumps(document).encode()
    with naming_full_disk(out / INDEX_NAME, len(text)):
        return atomic_write_bytes(out / INDEX_NAME, text)


def _merged_lengths(specs: list[dict | None]) -> dict[str, Any]:
    """The lengths key of a merged index: kept only when every part has one and they agree."""
    if not specs or any(s is None for s in specs):
        return {}
    head = {k: v for k, v in specs[0].items() if k != "files"}  # type: ignore[union-attr]
    if any({k: v for k, v in s.items() if k != "files"} != head for s in specs):  # type: ignore
        return {}
    return {LENGTHS_KEY: {**head, "files": [f for s in specs for f in s["files"]]}}  # type: ignore
