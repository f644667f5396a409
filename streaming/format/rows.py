"""Row codecs of the text shard formats (`json`, `csv`, `tsv`, `xsv`): one line of text per sample.

A row codec plays the part `SampleCodec` plays for MDS (same `decode`, `decode_columns`,
`column_names`), so shard readers, the batch path and the writers treat every format alike.
Column types are `str`, `int` and `float`, as in the MDS ecosystem's text formats.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streaming.errors import EncodeError, FormatError
from streaming.format.encodings.encoding import FileBytes

TEXT_TYPES = {"str": str, "int": int, "float": float}  # each type also parses its text


def _check_types(columns: Mapping[str, str], what: str) -> None:
    for name, kind in columns.items():
        if kind not in TEXT_TYPES:
            raise FormatError(f"{what} column {name!r} has type {kind!r}; "
                              f"text formats hold {', '.join(TEXT_TYPES)}")


def _typed(name: str, kind: str, value: Any) -> Any:
    """`value` if it is of column type `kind` (bool counts as int, as in the reference)."""
    if not isinstance(value, TEXT_TYPES[kind]):
        raise EncodeError(f"column {name!r} ({kind}) got {type(value).__name__}: {value!r}")
    return value


class RowCodec:
    """Shared surface of the text row codecs; subclasses define `decode_text` and `encode`."""

    format: str = ""
    newline: str = "\n"
    column_names: list[str]
    column_encodings: list[str]
    #: The folder the indexed files are read from where they lie (None: each shard is a file
    #: of its own, fetched into a cache). Set by the Parquet codec for files on a filesystem.
    in_place: str | None = None

    @property
    def columns(self) -> dict[str, str]:
        """`{name: type}` in the order decoded samples list them."""
        return dict(zip(self.column_names, self.column_encodings))

    @property
    def column_sizes(self) -> list[int | None]:
        return [None] * len(self.column_names)

    def decode(self, buf: memoryview | bytes) -> dict[str, Any]:
        """One sample from its line's bytes (newline included)."""
        return self.decode_text(str(buf, "utf-8"))

    def decode_text(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def encode(self, sample: Mapping[str, Any]) -> bytes:
        raise NotImplementedError

    def decode_columns(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray, *,
                       views: bool = False) -> list[Sequence[Any]]:
        """Many samples at once, column by column (`views` is accepted and has no effect:
        text values are always new objects)."""
        view = file.view
        samples = [self.decode_text(str(view[a:b], "utf-8"))
                   for a, b in zip(starts.tolist(), ends.tolist())]
        return [[s[name] for s in samples] for name in self.column_names]

    def decode_column(self, buf: memoryview | bytes, name: str) -> Any:
        return self.decode(buf)[name]

    def _key(self) -> tuple:
        return (type(self), tuple(self.column_names), tuple(self.column_encodings),
                self.newline, getattr(self, "separator", None))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowCodec) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.columns})"


class JSONRows(RowCodec):
    """`json` shards: each sample is `json.dumps(sample, sort_keys=True)` plus the newline."""

    format = "json"

    def __init__(self, columns: Mapping[str, str], newline: str = "\n") -> None:
        _check_types(columns, "json")
        self.column_names = sorted(columns)
        self.column_encodings = [columns[name] for name in self.column_names]
        self.newline = newline

    def decode_text(self, text: str) -> dict[str, Any]:
        sample = json.loads(text)
        if not isinstance(sample, dict):
            raise FormatError(f"a json row is an object, got {type(sample).__name__}")
        return sample

    def decode_columns(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray, *,
                       views: bool = False) -> list[Sequence[Any]]:
        view = file.view
        loads = json.loads
        samples = [loads(bytes(view[a:b])) for a, b in zip(starts.tolist(), ends.tolist())]
        return [[s[name] for s in samples] for name in self.column_names]

    def encode(self, sample: Mapping[str, Any]) -> bytes:
        row = {}
        for name, kind in zip(self.column_names, self.column_encodings):
            if name not in sample:
                raise EncodeError(f"sample has no column {name!r} (columns: {self.column_names})")
            row[name] = _typed(name, kind, sample[name])
        return (json.dumps(row, sort_keys=True) + self.newline).encode("utf-8")


class XSVRows(RowCodec):
    """`csv` / `tsv` / `xsv` shards: values joined by `separator`, then the newline; the data
    file starts with a header line of the column names. Values may not contain either."""

    def __init__(self, column_names: Sequence[str], column_encodings: Sequence[str],
                 separator: str, newline: str = "\n", fmt: str = "xsv") -> None:
        if len(column_names) != len(column_encodings):
            raise FormatError(f"{len(column_names)} column names but {len(column_encodings)} "
                              "column encodings")
        if not separator or not newline:
            raise FormatError(f"{fmt} needs a non-empty separator and newline")
        self.column_names = list(column_names)
        self.column_encodings = list(column_encodings)
        _check_types(self.columns, fmt)
        for name in self.column_names:
            if separator in name or newline in name:
                raise FormatError(f"{fmt} column name {name!r} contains the separator "
                                  "or the newline")
        self.separator = separator
        self.newline = newline
        self.format = fmt
        self._parsers = [TEXT_TYPES[kind] for kind in self.column_encodings]

    @classmethod
    def sorted(cls, columns: Mapping[str, str], separator: str, newline: str = "\n",
               fmt: str = "xsv") -> XSVRows:
        """Codec for `{name: type}` with columns sorted by name, as the writers order them."""
        names = sorted(columns)
        return cls(names, [columns[n] for n in names], separator, newline, fmt)

    def header(self) -> bytes:
        """The data file's first line: the column names."""
        return (self.separator.join(self.column_names) + self.newline).encode("utf-8")

    def _values(self, text: str) -> list[Any]:
        if not text.endswith(self.newline):
            raise FormatError(f"row does not end with the newline {self.newline!r}")
        parts = text[:-len(self.newline)].split(self.separator)
        if len(parts) != len(self._parsers):
            raise FormatError(f"row has {len(parts)} fields, the shard has "
                              f"{len(self._parsers)} columns")
        return [parse(part) for parse, part in zip(self._parsers, parts)]

    def decode_text(self, text: str) -> dict[str, Any]:
        return dict(zip(self.column_names, self._values(text)))

    def decode_columns(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray, *,
                       views: bool = False) -> list[Sequence[Any]]:
        view = file.view
        rows = [self._values(str(view[a:b], "utf-8"))
                for a, b in zip(starts.tolist(), ends.tolist())]
        if not rows:
            return [[] for _ in self.column_names]
        return [list(column) for column in zip(*rows)]

    def encode(self, sample: Mapping[str, Any]) -> bytes:
        values = []
        for name, kind in zip(self.column_names, self.column_encodings):
            if name not in sample:
                raise EncodeError(f"sample has no column {name!r} (columns: {self.column_names})")
            value = _typed(name, kind, sample[name])
            if isinstance(value, bool):  # "True" would not read back as an int
                raise EncodeError(f"column {name!r} (int) got a bool; text rows store ints")
            text = str(value)
            if self.separator in text or self.newline in text:
                raise EncodeError(f"column {name!r}: {text!r} contains the separator "
                                  f"{self.separator!r} or the newline {self.newline!r}")
            values.append(text)
        return (self.separator.join(values) + self.newline).encode("utf-8")


SEPARATORS = {"csv": ",", "tsv": "\t"}
ROW_FORMATS = ("json", "csv", "tsv", "xsv")


def row_codec(entry: Mapping[str, Any]) -> RowCodec:
    """The row codec an index.json shard entry (or a shard's meta config) describes."""
    fmt = entry.get("format")
    newline = entry.get("newline", "\n")
    if not isinstance(newline, str):
        raise FormatError(f"newline must be a string, got {newline!r}")
    if fmt == "json":
        columns = entry.get("columns")
        if not isinstance(columns, dict):
            raise FormatError(f"a json shard needs a 'columns' object, got {columns!r}")
        return JSONRows(columns, newline)
    if fmt in SEPARATORS or fmt == "xsv":
        separator = SEPARATORS.get(fmt) or entry.get("separator")
        names, kinds = entry.get("column_names"), entry.get("column_encodings")
        if not isinstance(separator, str) or not isinstance(names, list) or not isinstance(
                kinds, list) or not all(isinstance(x, str) for x in names + kinds):
            raise FormatError(f"a {fmt} shard needs column_names, column_encodings"
                              f"{'' if fmt in SEPARATORS else ' and separator'} as strings")
        return XSVRows(names, kinds, separator, newline, fmt)
    raise FormatError(f"format {fmt!r} is not a text row format ({', '.join(ROW_FORMATS)})")
