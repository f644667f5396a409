"""Columns of per-shard text an index holds (file names, codecs, digests) without one Python
object per shard: the strings of a column are one bytes blob cut by an offsets array, decoded
only for the shards a process asks about."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np


def _position(i: int, count: int) -> int:
    """Index `i` (negative counts from the end) checked against `count` entries."""
    i = int(i)
    if not -count <= i < count:
        raise IndexError(f"entry {i} out of range [0, {count})")
    return i % count


@dataclass(frozen=True, eq=False)
class Names(Sequence):
    """A column of ASCII/UTF-8 strings (or None) as one blob and n + 1 offsets.

    Args:
        blob: every present string's bytes, concatenated in order.
        offsets: int64 start of string i at offsets[i], its end at offsets[i + 1].
        present: bool per entry, False where the entry is None (None: all present).
    """

    blob: bytes
    offsets: np.ndarray
    present: np.ndarray | None = None

    @classmethod
    def of(cls, values: Iterable[str | None]) -> Names:
        """A column holding `values` in order."""
        values = list(values)
        encoded = [b"" if v is None else v.encode() for v in values]
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        missing = np.array([v is None for v in values], bool)
        return cls(b"".join(encoded), offsets, ~missing if missing.any() else None)

    @classmethod
    def repeat(cls, value: str | None, count: int) -> Names:
        """A column of `count` copies of `value`."""
        if value is None:
            return cls(b"", np.zeros(count + 1, np.int64), np.zeros(count, bool))
        data = value.encode()
        return cls(data * count, np.arange(count + 1, dtype=np.int64) * len(data))

    @classmethod
    def spans(cls, blob: bytes, starts: np.ndarray, ends: np.ndarray) -> Names:
        """A column of the strings at blob[starts[i]:ends[i]]."""
        lengths = np.asarray(ends, np.int64) - np.asarray(starts, np.int64)
        total = int(lengths.sum())
        ramp = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        data = np.frombuffer(blob, np.uint8)[np.repeat(starts, lengths) + ramp]
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(data.tobytes(), offsets)

    @classmethod
    def concat(cls, parts: Sequence[Names]) -> Names:
        """One column of `parts` end to end."""
        if not parts:
            return cls.of([])
        shifts = np.cumsum([0] + [len(p.blob) for p in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]] + [
            p.offsets[1:] - p.offsets[0] + s for p, s in zip(parts, shifts)]).astype(np.int64)
        offsets -= offsets[0]
        blob = b"".join(p.blob[int(p.offsets[0]):int(p.offsets[-1])] for p in parts)
        present = None
        if any(p.present is not None for p in parts):
            present = np.concatenate([p.mask() for p in parts])
        return cls(blob, offsets, present)

    def mask(self) -> np.ndarray:
        """bool per entry: whether it is a string (not None)."""
        return np.ones(len(self), bool) if self.present is None else self.present

    def lengths(self) -> np.ndarray:
        """Byte length per entry (0 for None)."""
        return np.diff(self.offsets)

    def fixed(self) -> np.ndarray:
        """The present strings as one fixed-width bytes array (for sorting and uniqueness)."""
        keep = np.flatnonzero(self.mask())
        if not len(keep):
            return np.zeros(0, "S1")
        lengths = self.lengths()[keep]
        width = max(int(lengths.max()), 1)
        out = np.zeros((len(keep), width), np.uint8)
        rows = np.repeat(np.arange(len(keep)), lengths)
        cols = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        starts = np.repeat(self.offsets[keep], lengths)
        out[rows, cols] = np.frombuffer(self.blob, np.uint8)[starts + cols]
        return out.view(f"S{width}").reshape(-1)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = _position(i, len(self))
        if self.present is not None and not self.present[i]:
            return None
        return self.blob[int(self.offsets[i]):int(self.offsets[i + 1])].decode()

    def __iter__(self) -> Iterator[str | None]:
        offsets = self.offsets.tolist()
        present = None if self.present is None else self.present.tolist()
        for i in range(len(offsets) - 1):
            if present is not None and not present[i]:
                yield None
            else:
                yield self.blob[offsets[i]:offsets[i + 1]].decode()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Names):
            return (len(self) == len(other) and bool(np.array_equal(self.mask(), other.mask()))
                    and bool(np.array_equal(self.lengths(), other.lengths()))
                    and self.blob[int(self.offsets[0]):int(self.offsets[-1])]
                    == other.blob[int(other.offsets[0]):int(other.offsets[-1])])
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True, eq=False)
class Digests(Sequence):
    """Per shard, the {algorithm: hex digest} map of one of its files, as one Names column per
    algorithm (None where the shard records no such digest).

    Args:
        algos: the algorithm names, in the order the maps list them.
        columns: one column per algorithm.
    """

    algos: tuple[str, ...]
    columns: tuple[Names, ...]
    count: int

    @classmethod
    def of(cls, maps: Sequence[dict]) -> Digests:
        """Columns of the given maps (one per shard)."""
        algos: dict[str, None] = {}
        for m in maps:
            algos.update(dict.fromkeys(m))
        return cls(tuple(algos), tuple(Names.of([m.get(a) for m in maps]) for a in algos),
                   len(maps))

    @classmethod
    def concat(cls, parts: Sequence[Digests]) -> Digests:
        """The shards of `parts` end to end (an algorithm a part lacks is None there)."""
        algos = tuple(dict.fromkeys(a for p in parts for a in p.algos))
        columns = []
        for algo in algos:
            columns.append(Names.concat([
                p.columns[p.algos.index(algo)] if algo in p.algos else Names.repeat(None, len(p))
                for p in parts]))
        return cls(algos, tuple(columns), sum(len(p) for p in parts))

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = _position(i, self.count)
        out = {}
        for algo, column in zip(self.algos, self.columns):
            value = column[i]
            if value is not None:
                out[algo] = value
        return out

    def __iter__(self) -> Iterator[dict]:
        return (self[i] for i in range(self.count))


@dataclass(frozen=True, eq=False)
class TemplateEntries(Sequence):
    """Shard entries that differ only in a few fields: entry i is `template` with each path of
    `fields` set to that column's i-th value. Built on demand, one entry at a time.

    Args:
        template: the first shard's entry.
        fields: key path -> column (Names for strings, an int64 array for integers).
    """

    template: dict
    fields: dict[tuple, Names | np.ndarray]
    count: int

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = _position(i, self.count)
        entry = copy.deepcopy(self.template)
        for path, column in self.fields.items():
            node = entry
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = column[i] if isinstance(column, Names) else int(column[i])
        return entry

    def __iter__(self) -> Iterator[dict]:
        return (self[i] for i in range(self.count))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, TemplateEntries)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)


def distinct_values(entries: Sequence[dict], key: str) -> list:
    """The distinct values of top-level field `key` over shard entries (missing counts as
    None), in first-seen order; one look at a template and its column for `TemplateEntries`.

    Args:
        entries: shard entries (a list of dicts or TemplateEntries).
        key: the entry's field.
    """
    if isinstance(entries, TemplateEntries) and len(entries):
        column = entries.fields.get((key,))
        if column is None:
            return [entries.template.get(key)]
        if isinstance(column, Names):
            return list(dict.fromkeys(column[int(k)] for k in _firsts(column.fixed())))
        return [int(v) for v in np.asarray(column)[_firsts(np.asarray(column))]]
    seen: dict[str, object] = {}
    for entry in entries:
        value = entry.get(key)
        seen.setdefault(json.dumps(value, sort_keys=True), value)
    return list(seen.values())


def _firsts(values: np.ndarray) -> np.ndarray:
    return np.sort(np.unique(values, return_index=True)[1])
