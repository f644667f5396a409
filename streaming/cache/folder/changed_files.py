"""Which cached files a new index.json changed, in time and memory proportional to the shards
and without one dict per shard: files are matched by name with numpy, and two shard entries
read by the vectorised scan (`TemplateEntries`) are equal when their templates agree outside the
varying fields and those fields' columns agree. Indexes read entry by entry are compared entry
by entry, as dicts."""

from __future__ import annotations

import copy

import numpy as np

from streaming.format.index import LENGTHS_KEY, DatasetIndex
from streaming.format.index_columns import Names, TemplateEntries


def file_entries(index: DatasetIndex) -> dict[str, dict]:
    """File name (raw, compressed, and the per-shard sample-lengths side file) -> what the
    index says about it (its shard's whole entry, plus the side file's own).

    Args:
        index: a parsed (so validated) index.
    """
    out: dict[str, dict] = {}
    for shard, raw, zipped in zip(index.shards, index.basenames, index.zip_basenames):
        out[raw] = shard
        if zipped is not None:
            out[zipped] = shard
    for k, side in enumerate(_side_files(index)):
        if isinstance(side, dict) and "basename" in side:
            out[str(side["basename"])] = {"shard": index.shards[k], "file": side}
    return out


def _side_files(index: DatasetIndex) -> list:
    lengths = index.extra.get(LENGTHS_KEY)
    files = lengths.get("files") if isinstance(lengths, dict) else None
    return files[:index.num_shards] if isinstance(files, list) else []


def stale_files(old: DatasetIndex | None, new: DatasetIndex) -> list[str]:
    """Names whose entry differs between two indexes or that only one of them has (every name
    of `new` when there is no valid `old`).

    Args:
        old: the folder's previous index, None when it had none or an invalid one.
        new: the index just fetched.
    """
    if old is None:
        return [n for n in _names(new)[0] if n is not None]
    if not (isinstance(old.shards, TemplateEntries) and isinstance(new.shards, TemplateEntries)):
        before, after = file_entries(old), file_entries(new)
        return [n for n in before.keys() | after.keys() if before.get(n) != after.get(n)]
    old_names, old_shard, old_side = _names(old)
    new_names, new_shard, new_side = _names(new)
    aligned = old_names == new_names  # the usual case: the same files, maybe new facts
    at, found = ((np.arange(len(new_names)), np.ones(len(new_names), bool)) if aligned
                 else _match(old_names, new_names))
    same = found.copy()
    same[found] = (old_side[at[found]] == new_side[found]) & _same_entries(
        old.shards, new.shards, old_shard[at[found]], new_shard[found], aligned)
    for k in np.flatnonzero(same & new_side).tolist():  # side files: compare their own entries
        same[k] = _side_files(old)[old_shard[at[k]]] == _side_files(new)[new_shard[k]]
    kept = np.zeros(len(old_names), bool)
    kept[at[same]] = True
    stale = [new_names[k] for k in np.flatnonzero(~same).tolist()]
    return list(dict.fromkeys(stale + [old_names[k] for k in np.flatnonzero(~kept).tolist()]))


def _names(index: DatasetIndex) -> tuple[Names, np.ndarray, np.ndarray]:
    """Every file name of `index`, the shard of each and whether it is a side file."""
    zipped = np.flatnonzero(index.zip_basenames.mask())
    sides = [(k, str(s["basename"])) for k, s in enumerate(_side_files(index))
             if isinstance(s, dict) and "basename" in s]
    names = Names.concat([
        index.basenames,
        Names(index.zip_basenames.blob, _pick(index.zip_basenames.offsets, zipped)),
        Names.of([name for _, name in sides])])
    shard = np.concatenate([np.arange(index.num_shards), zipped,
                            np.array([k for k, _ in sides], np.int64)]).astype(np.int64)
    side = np.zeros(len(shard), bool)
    side[len(shard) - len(sides):] = True
    return names, shard, side


def _pick(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Offsets of the chosen rows of a column as a column of their own (rows ascending)."""
    if not len(rows):
        return np.zeros(1, np.int64)
    lengths = offsets[rows + 1] - offsets[rows]
    starts = offsets[rows]
    if not (starts[1:] == starts[:-1] + lengths[:-1]).all():
        raise ValueError("rows are not contiguous in the blob")
    return np.concatenate([[starts[0]], starts + lengths]).astype(np.int64)


def _match(old: Names, new: Names) -> tuple[np.ndarray, np.ndarray]:
    """For each new name, the position of the same name in `old` and whether there is one."""
    a, b = old.fixed(), new.fixed()
    if not len(a) or not len(b):
        return np.zeros(len(b), np.int64), np.zeros(len(b), bool)
    width = max(a.dtype.itemsize, b.dtype.itemsize)
    a, b = a.astype(f"S{width}"), b.astype(f"S{width}")
    order = np.argsort(a, kind="stable")
    pos = np.minimum(np.searchsorted(a[order], b), len(a) - 1)
    return order[pos], a[order[pos]] == b


def _same_entries(old: TemplateEntries, new: TemplateEntries, old_rows: np.ndarray,
                  new_rows: np.ndarray, aligned: bool) -> np.ndarray:
    """Per pair of rows: whether the two entries are equal (`aligned`: the rows are the same
    shards of both, in order)."""
    if set(old.fields) != set(new.fields) or _constant(old) != _constant(new):
        return np.zeros(len(old_rows), bool)
    same = np.ones(len(old_rows), bool)
    for path, column in old.fields.items():
        other = new.fields[path]
        if isinstance(column, Names) and isinstance(other, Names):
            if aligned and column == other:
                continue
            a, b = column.fixed()[old_rows], other.fixed()[new_rows]
            width = max(a.dtype.itemsize, b.dtype.itemsize)
            same &= a.astype(f"S{width}") == b.astype(f"S{width}")
        else:
            same &= np.asarray(column)[old_rows] == np.asarray(other)[new_rows]
    return same


def _constant(entries: TemplateEntries) -> dict:
    """The template without its varying fields."""
    out = copy.deepcopy(entries.template)
    for path in entries.fields:
        node = out
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = None
    return out
