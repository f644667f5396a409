"""The vectorised path of `parse_index`: an index whose MDS shard entries share one layout,
read by `index_scan` and checked column by column with the same rules the `json` path applies
entry by entry. It never raises for a fault in the shards: it returns None, and the `json`
path then names the fault exactly as it always has. Shard 0 is checked by the `json` path's
own function, which raises what that path would raise first."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from streaming.errors import IndexFileError
from streaming.format.index_columns import Digests, Names, TemplateEntries
from streaming.format.index_entries import (
    LENGTHS_KEY,
    MAX_PATH_BYTES,
    MAX_RAW_BYTES,
    MAX_ZIP_BYTES,
    MIN_RAW_BYTES,
    RESERVED_NAMES,
    check_basename,
)
from streaming.format.index_model import DatasetIndex
from streaming.format.index_scan import Scanned, scan_index
from streaming.format.index_shard import check_document, check_mds_shard

_PART_MAX = 63  # characters of one part of a plain name (see index_entries._PLAIN)
_WIDE = 128  # names wider than this are compared as Python strings, not a fixed-width array
_FEW = 512  # columns this short are checked by a plain loop


def _table(chars: bytes) -> np.ndarray:
    out = np.zeros(256, bool)
    out[list(chars)] = True
    return out


_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_PLAIN_BYTE = _table(_LETTERS + b"./")
_PART_START = _table(_LETTERS)


def fast_index(data: bytes, *, source: str, root: Path | None) -> DatasetIndex | None:
    """The DatasetIndex of `data` when the vectorised scan reads it and every check passes,
    else None (IndexFileError only for what the `json` path raises first as well).

    Args:
        data: index.json bytes.
        source: the index's path or URL (for error messages).
        root: the folder basenames are relative to.
    """
    scanned = scan_index(data)
    if scanned is None or scanned.template.get("format") != "mds":
        return None
    check_document(scanned.top, source)
    template, fields, count = scanned.template, scanned.fields, scanned.count
    check_mds_shard(template, 0, source, set())
    samples, raw = fields[("samples",)], fields[("raw_data", "bytes")]
    zipped = template["zip_data"] is not None
    zip_bytes = fields[("zip_data", "bytes")] if zipped else np.zeros(count, np.int64)
    names = fields[("raw_data", "basename")]
    zip_names = fields[("zip_data", "basename")] if zipped else Names.repeat(None, count)
    if not (_sizes_ok(samples, raw, zip_bytes) and _names_ok(names, source)
            and _names_ok(zip_names, source)):
        return None
    side = _side_names(scanned, source)
    if side is None or not _unique([names, zip_names, Names.of(side)]):
        return None
    extra = {k: v for k, v in scanned.top.items() if k not in ("shards", "version")}
    return columnar_index(template, fields, count, extra, source=source, root=root)


def columnar_index(template: dict, fields: dict[tuple, Names | np.ndarray], count: int,
                   extra: dict, *, source: str, root: Path | None) -> DatasetIndex:
    """The DatasetIndex of checked shard entries that are `template` with `fields` varying.

    Args:
        template: shard 0's entry.
        fields: key path -> column of the varying fields.
        count: the number of shards.
        extra: the document's other top-level keys.
        source: the index's path or URL.
        root: the folder basenames are relative to.
    """
    zipped = template["zip_data"] is not None
    return DatasetIndex(
        shards=TemplateEntries(template, fields, count),
        samples_per_shard=np.asarray(fields[("samples",)], np.int64),
        raw_bytes=np.asarray(fields[("raw_data", "bytes")], np.int64),
        zip_bytes=np.asarray(fields[("zip_data", "bytes")], np.int64) if zipped
        else np.zeros(count, np.int64),
        basenames=fields[("raw_data", "basename")],  # type: ignore[arg-type]
        zip_basenames=fields[("zip_data", "basename")] if zipped  # type: ignore[arg-type]
        else Names.repeat(None, count),
        compression=Names.repeat(template["compression"], count),
        raw_hashes=_digests(fields, "raw_data", count),
        zip_hashes=_digests(fields, "zip_data", count),
        columns=dict(zip(template["column_names"], template["column_encodings"])),
        source=source, root=root, extra=extra)


def _sizes_ok(samples: np.ndarray, raw: np.ndarray, zip_bytes: np.ndarray) -> bool:
    """Byte counts within their limits and sample counts that fit their raw files."""
    return bool(((raw >= MIN_RAW_BYTES) & (raw <= MAX_RAW_BYTES)).all()
                and (zip_bytes <= MAX_ZIP_BYTES).all()
                and (samples <= np.maximum(raw - MIN_RAW_BYTES, 0) // 4).all())


def plain_names(names: Names) -> np.ndarray:
    """Per present name: whether it is plain (parts of letters, digits, `_-.`, none starting
    with a dot and none over 63 characters), at most MAX_PATH_BYTES long and not reserved;
    the vectorised form of the common case of `check_basename`.

    Args:
        names: a column of names.
    """
    keep = np.flatnonzero(names.mask())
    lengths = names.lengths()[keep]
    ok = (lengths > 0) & (lengths <= MAX_PATH_BYTES)
    starts = names.offsets[keep]
    at = np.repeat(starts, lengths) + _ramp(lengths)
    blob = np.frombuffer(names.blob, np.uint8)[at]
    owner = np.repeat(np.arange(len(keep)), lengths)
    first = np.zeros(len(blob), bool)
    first[np.cumsum(lengths)[lengths > 0] - lengths[lengths > 0]] = True
    part_start = first | np.concatenate([[False], blob[:-1] == ord("/")])
    bad = ~_PLAIN_BYTE[blob] | (part_start & ~_PART_START[blob])
    index = np.arange(len(blob))
    since = index - np.maximum.accumulate(np.where(part_start, index, 0))
    bad |= since >= _PART_MAX
    ok[np.unique(owner[bad])] = False
    ends = starts + lengths
    data = np.frombuffer(names.blob, np.uint8)
    ok &= data[np.maximum(ends - 1, 0)] != ord("/")
    for reserved in RESERVED_NAMES:
        ok &= ~_ends_with_leaf(data, starts, ends, reserved.encode())
    return ok


def _ends_with_leaf(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    leaf: bytes) -> np.ndarray:
    size = len(leaf)
    long = (ends - starts) >= size
    out = np.zeros(len(starts), bool)
    rows = np.flatnonzero(long)
    tails = data[(ends[rows] - size)[:, None] + np.arange(size)]
    match = (tails == np.frombuffer(leaf, np.uint8)).all(axis=1)
    exact = ends[rows] - starts[rows] == size
    slash = data[np.maximum(ends[rows] - size - 1, 0)] == ord("/")
    out[rows] = match & (exact | slash)
    return out


def _ramp(lengths: np.ndarray) -> np.ndarray:
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _names_ok(names: Names, source: str) -> bool:
    """Every present name passes `check_basename` (the plain ones checked vectorised, unless
    there are so few that numpy's fixed costs outweigh a loop)."""
    if len(names) <= _FEW:
        try:
            for k, name in enumerate(names):
                if name is not None:
                    check_basename(name, source=source, where=f"shard {k}")
        except IndexFileError:
            return False
        return True
    plain = plain_names(names)
    present = np.flatnonzero(names.mask())
    for k in present[~plain].tolist():
        try:
            check_basename(names[k], source=source, where=f"shard {k}")
        except IndexFileError:
            return False
    return True


def _side_names(scanned: Scanned, source: str) -> list[str] | None:
    """The checked names of the sample-lengths side files (None when one is unsafe)."""
    spec = scanned.top.get(LENGTHS_KEY)
    files = spec.get("files") if isinstance(spec, dict) else None
    out = []
    for i, entry in enumerate(files if isinstance(files, list) else []):
        if isinstance(entry, dict) and "basename" in entry:
            try:
                out.append(check_basename(entry["basename"], source=source, where=str(i)))
            except IndexFileError:
                return None
    return out


def _unique(columns: list[Names]) -> bool:
    """No name appears twice over the columns."""
    names = Names.concat(columns)
    if len(names) <= _FEW or int(names.lengths().max(initial=0)) > _WIDE:
        present = [n for n in names if n is not None]
        return len(set(present)) == len(present)
    fixed = names.fixed()
    return len(np.unique(fixed)) == len(fixed)


def _digests(fields: dict, key: str, count: int) -> Digests:
    algos = [path[2] for path in fields if path[0] == key and len(path) == 3
             and path[1] == "hashes"]
    return Digests(tuple(algos), tuple(fields[(key, "hashes", a)] for a in algos), count)
