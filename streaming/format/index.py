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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import (
    ArgumentError,
    IndexFileError,
    IndexJSONError,
    IndexNotFoundError,
    UnknownEncodingError,
)
from streaming.format.disk_full import naming_full_disk
from streaming.format.encodings import get_encoding
from streaming.format.index_entries import (
    INDEX_VERSION,
    MAX_RAW_BYTES,
    MIN_RAW_BYTES,
    check_basename,
    check_compressed_copy,
    check_compression,
    check_file_entry,
    check_keys,
    fail,
    is_count,
)
from streaming.format.rows import ROW_FORMATS, RowCodec
from streaming.format.sample import SampleCodec
from streaming.format.text_shard_index import check_text_shard
from streaming.util.atomic import atomic_write_bytes

INDEX_NAME = "index.json"
# Top-level key describing per-shard token-count side files (old readers ignore top-level keys).
LENGTHS_KEY = "sample_lengths"
LENGTHS_SUFFIX = ".lengths"
LENGTHS_DTYPE = "<u4"
SUPPORTED_FORMATS = ("mds", *ROW_FORMATS)
_SCHEMA_KEYS = ("column_names", "column_encodings", "column_sizes")
_REQUIRED = {
    "format": str,
    "version": int,
    "column_names": list,
    "column_encodings": list,
    "column_sizes": list,
    "compression": (str, type(None)),
    "hashes": list,
    "raw_data": dict,
    "zip_data": (dict, type(None)),
    "samples": int,
    "size_limit": (int, type(None)),
}


@dataclass(frozen=True, eq=False)
class DatasetIndex:
    """One parsed index.json: raw shard entries plus per-shard numpy arrays for fast planning."""

    shards: list[dict]
    samples_per_shard: np.ndarray
    raw_bytes: np.ndarray
    zip_bytes: np.ndarray
    basenames: list[str]
    zip_basenames: list[str | None]
    compression: list[str | None]
    columns: dict[str, str]
    source: str = ""
    root: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    row_codec: RowCodec | None = None  # the text formats' rows (None: MDS)
    sample_offsets: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts = np.zeros(len(self.samples_per_shard) + 1, np.int64)
        np.cumsum(self.samples_per_shard, out=starts[1:])
        object.__setattr__(self, "sample_offsets", starts)

    @property
    def num_samples(self) -> int:
        """Total samples over every shard."""
        return int(self.sample_offsets[-1])

    @property
    def num_shards(self) -> int:
        """Number of shard entries (including empty shards)."""
        return len(self.shards)

    @property
    def format(self) -> str:
        """Shard format: `mds`, or a text format (`json`, `csv`, `tsv`, `xsv`)."""
        return "mds" if self.row_codec is None else self.row_codec.format

    @property
    def column_sizes(self) -> list[int | None]:
        """Fixed byte size per column (None for variable), in on-disk order."""
        if self.row_codec is not None:
            return self.row_codec.column_sizes
        return [get_encoding(enc).size for enc in self.columns.values()]

    def codec(self, *, allow_unsafe_types: bool = False) -> SampleCodec | RowCodec:
        """A SampleCodec for this dataset's columns (UnsafeTypeError for pkl unless allowed),
        or the row codec of a text format."""
        if self.row_codec is not None:
            return self.row_codec
        return SampleCodec(
            list(self.columns), list(self.columns.values()), allow_unsafe_types=allow_unsafe_types
        )

    def locate(self, sample_ids: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Map global sample ids to (shard index, row within shard), vectorised."""
        ids = np.asarray(sample_ids, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_samples):
            raise IndexError(f"sample id out of range [0, {self.num_samples}) in {self.source}")
        shard = np.searchsorted(self.sample_offsets, ids, side="right") - 1
        return shard, ids - self.sample_offsets[shard]

    def raw_path(self, shard: int) -> Path:
        """Local path of shard `shard`'s raw file (needs `root`)."""
        return self._resolve(self.basenames[shard])

    def zip_path(self, shard: int) -> Path | None:
        """Local path of shard `shard`'s compressed file, or None if it is not compressed."""
        name = self.zip_basenames[shard]
        return None if name is None else self._resolve(name)

    def _resolve(self, basename: str) -> Path:
        if self.root is None:
            raise ArgumentError(f"index {self.source} was parsed without a root folder")
        return self.root.joinpath(*basename.split("/"))


def max_samples(raw_bytes: int) -> int:
    """The most samples a raw shard of `raw_bytes` can hold (4 offset bytes per sample)."""
    return max(raw_bytes - MIN_RAW_BYTES, 0) // 4


def _check_shard(
    shard: Any, i: int, source: str, schemas: set[tuple]
) -> tuple[str, int, str | None, int]:
    where = f"shard {i}"
    if not isinstance(shard, dict):
        raise fail(source, where, f"expected an object, got {type(shard).__name__}")
    fmt = shard.get("format")
    if fmt not in SUPPORTED_FORMATS:
        raise fail(
            source, where,
            f"format {fmt!r} is not supported (supported: {', '.join(SUPPORTED_FORMATS)})",
        )
    check_keys(shard, _REQUIRED, source, where)
    raw_name, raw_size = check_file_entry(shard["raw_data"], source=source, where=where,
                                           limits=(MIN_RAW_BYTES, MAX_RAW_BYTES))
    where = f"shard {i} ({raw_name})"
    if not is_count(shard["samples"]):
        raise fail(source, where, f"samples must be a non-negative int: {shard['samples']!r}")
    if shard["samples"] > max_samples(raw_size):
        raise fail(source, where, f"{shard['samples']} samples cannot fit in {raw_size} bytes "
                                   f"(at most {max_samples(raw_size)})")
    # Shards almost always share one schema: check each distinct schema once.
    schema = tuple(tuple(shard[key]) for key in _SCHEMA_KEYS)
    try:
        known = schema in schemas
    except TypeError:  # unhashable junk in a column list; _check_columns names it
        known = False
    if not known:
        _check_columns(shard, source, where)
        schemas.add(schema)
    check_compression(shard, source, where)
    zip_name, zip_size = check_compressed_copy(shard, "zip_data", source, where)
    if not all(isinstance(h, str) for h in shard["hashes"]):
        raise fail(source, where, f"hashes must be algorithm names: {shard['hashes']!r}")
    return raw_name, raw_size, zip_name, zip_size


def _check_columns(shard: dict, source: str, where: str) -> None:
    names, encodings = shard["column_names"], shard["column_encodings"]
    sizes = shard["column_sizes"]
    if not (len(names) == len(encodings) == len(sizes)):
        raise fail(source, where, "column_names, column_encodings, column_sizes differ in length")
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise fail(source, where, f"column names must be unique strings: {names!r}")
    for name, enc, size in zip(names, encodings, sizes):
        try:
            expected = get_encoding(enc).size
        except UnknownEncodingError as exc:
            raise UnknownEncodingError(f"{source}: {where}: column {name!r}: {exc}") from None
        if size != expected or isinstance(size, bool):
            raise fail(source, where, f"column {name!r} ({enc}) has size {size!r}, not {expected}")


def parse_index(
    data: bytes | str | dict, *, source: str, root: Path | None = None
) -> DatasetIndex:
    """Validate an index.json document (text or already-parsed) into a DatasetIndex."""
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IndexJSONError(f"{source}: not valid JSON (truncated?): {exc}",
                                 getattr(exc, "doc", ""), getattr(exc, "pos", 0)) from None
    if not isinstance(data, dict):
        raise IndexFileError(f"{source}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != INDEX_VERSION or isinstance(version, bool):
        raise IndexFileError(f"Unsupported streaming data version: {version!r}. Expected "
                             f"version 2. {source}: index version {version!r} is not supported")
    shards = data.get("shards")
    if not isinstance(shards, list):
        raise IndexFileError(f"{source}: 'shards' must be a list, got {type(shards).__name__}")
    count = len(shards)
    samples = np.zeros(count, np.int64)
    raw_bytes = np.zeros(count, np.int64)
    zip_bytes = np.zeros(count, np.int64)
    basenames: list[str] = []
    zip_basenames: list[str | None] = []
    columns: dict[str, str] = {}
    schemas: set[tuple] = set()
    row_codecs: dict[tuple, RowCodec] = {}
    row_codec: RowCodec | None = None
    named: dict[str | None, int] = {}  # file name -> the shard that names it
    for i, shard in enumerate(shards):
        fmt = shard.get("format") if isinstance(shard, dict) else None
        if fmt in ROW_FORMATS:
            codec, raw_name, raw_size, zip_name, zip_size = check_text_shard(
                shard, i, source, row_codecs)
            schema = codec.columns
        else:
            codec = None
            raw_name, raw_size, zip_name, zip_size = _check_shard(shard, i, source, schemas)
            schema = dict(zip(shard["column_names"], shard["column_encodings"]))
        if i == 0:
            columns, row_codec = schema, codec
        elif codec != row_codec:
            raise fail(source, f"shard {i} ({raw_name})",
                       f"format {fmt!r} ({codec}) differs from shard 0's "
                        f"({row_codec or 'mds'}): one index holds one format")
        elif schema != columns or list(schema) != list(columns):
            raise fail(
                source, f"shard {i} ({raw_name})",
                f"columns {schema} differ from shard 0's {columns}",
            )
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
        shards=shards,
        samples_per_shard=samples,
        raw_bytes=raw_bytes,
        zip_bytes=zip_bytes,
        basenames=basenames,
        zip_basenames=zip_basenames,
        compression=[shard["compression"] for shard in shards],
        columns=columns,
        source=source,
        root=root,
        extra={k: v for k, v in data.items() if k not in ("shards", "version")},
        row_codec=row_codec,
    )


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
        data = file.read_bytes()
    except FileNotFoundError:
        raise IndexNotFoundError(f"{file}: index file not found: it does not exist") from None
    except OSError as exc:
        raise IndexFileError(f"{file}: cannot read index: {exc}") from exc
    return parse_index(data, source=str(file), root=Path(root) if root else file.parent)


def index_bytes(shards: list[dict], extra: dict[str, Any] | None = None) -> bytes:
    """index.json bytes exactly as the reference writer lays them out (sorted keys, one line).

    `extra` adds top-level keys, the one place reference readers ignore unknown keys.
    """
    document = {**(extra or {}), "shards": shards, "version": INDEX_VERSION}
    if extra and {"shards", "version"} & set(extra):
        raise ArgumentError("extra index keys cannot replace 'shards' or 'version'")
    return json.dumps(document, sort_keys=True).encode()


def write_index(
    directory: str | os.PathLike, shards: list[dict], extra: dict[str, Any] | None = None
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
