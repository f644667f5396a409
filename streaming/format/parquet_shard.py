"""Read one cached Parquet row group: the bytes of its projected column chunks (`<file>.rgNNNNN`)
decoded by pyarrow with the file's footer (`<file>.footer`, beside it).

The cached file holds only the file's byte ranges the index lists, one after the other;
`RangeFile` shows pyarrow those bytes at their places in the original file. A row group is
decoded whole, once per process while it stays among the last few decoded (`DecodedGroups`),
and rows are served from the decoded columns.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import ParquetFileError, PlanError
from streaming.format.parquet_decoded import DECODED
from streaming.format.parquet_footer import (
    RowGroupSpan,
    group_span,
    parse_footer,
    projected_leaves,
    pyarrow_parquet,
)
from streaming.format.parquet_index import (
    FOOTER_SUFFIX,
    ParquetCodec,
    parse_footer_file,
    split_group_name,
)
from streaming.format.parquet_values import Column, column_lengths, decode_column, sample_dicts
from streaming.format.shard import ShardLayout, ShardReader
from streaming.util.confine import READING, confine


class RangeFile(io.RawIOBase):
    """A read-only file showing `data` (the concatenated `ranges` of a file of `size` bytes)
    at the ranges' own offsets; a read outside them is an OSError.

    Args:
        data: the ranges' bytes, in order.
        ranges: [start, end) offsets in the original file.
        size: the original file's size.
    """

    def __init__(self, data: bytes | memoryview, ranges: Sequence[tuple[int, int]],
                 size: int) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._starts = [start for start, _ in ranges]
        self._ends = [end for _, end in ranges]
        self._at = np.cumsum([0] + [end - start for start, end in ranges]).tolist()
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> memoryview:  # type: ignore[override]
        """Up to `size` bytes from the position (to the end of its range), as a view of the
        cached bytes: pyarrow takes it without a copy."""
        pos = self._pos
        for k, (start, end) in enumerate(zip(self._starts, self._ends)):
            if start <= pos < end:
                count = end - pos if size is None or size < 0 else min(size, end - pos)
                lo = self._at[k] + pos - start
                self._pos += count
                return self._data[lo:lo + count]
        if pos >= self._size:
            return self._data[:0]
        raise OSError(f"byte {pos} is not among the cached ranges")

    def readinto(self, buffer: Any) -> int:
        pos = self._pos
        for k, (start, end) in enumerate(zip(self._starts, self._ends)):
            if start <= pos < end:
                count = min(len(buffer), end - pos)
                lo = self._at[k] + pos - start
                memoryview(buffer).cast("B")[:count] = self._data[lo:lo + count]
                self._pos += count
                return count
        if pos >= self._size:
            return 0
        raise OSError(f"byte {pos} is not among the cached ranges")


FOOTERS_KEPT = 256  # parsed footers a process keeps


@dataclass(frozen=True)
class CachedFooter:
    """A Parquet file's footer as the cache keeps it, parsed.

    Args:
        size: the file's size.
        tail: its last bytes (footer, footer length, magic).
        meta: the parsed FileMetaData.
        mtime_ns: its modification time in ns when indexed (0: not known).
    """

    size: int
    tail: bytes
    meta: Any
    mtime_ns: int = 0


_FOOTERS: OrderedDict[tuple, CachedFooter] = OrderedDict()
_FOOTERS_LOCK = threading.Lock()


def cached_footer(path: Path) -> CachedFooter:
    """The footer file at `path` (`<file>.footer`), parsed once per version and process."""
    stat = path.stat()
    key = (str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    with _FOOTERS_LOCK:
        found = _FOOTERS.get(key)
    if found is None:
        size, mtime_ns, tail = parse_footer_file(path.read_bytes())
        found = CachedFooter(size, tail, parse_footer(tail, path.name[:-len(FOOTER_SUFFIX)]),
                             mtime_ns)
        with _FOOTERS_LOCK:
            _FOOTERS[key] = found
            while len(_FOOTERS) > FOOTERS_KEPT:
                _FOOTERS.popitem(last=False)
    return found


def _one_chunk(column: Any) -> Any:
    """A decoded table's column as one Arrow array (joined only when it came in several)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


@functools.cache
def _checks_pages() -> bool:
    """Whether this pyarrow's ParquetFile can check page checksums (pyarrow >= 14)."""
    parameters = inspect.signature(pyarrow_parquet().ParquetFile).parameters
    return "page_checksum_verification" in parameters


def _open_file(source: RangeFile | str, meta: Any) -> Any:
    """A pyarrow ParquetFile over `source` with its footer given: no read-ahead past the
    cached ranges, and page checksums checked where the writer recorded them."""
    options: dict[str, Any] = {"metadata": meta, "pre_buffer": False}
    if _checks_pages():
        options["page_checksum_verification"] = True
    return pyarrow_parquet().ParquetFile(source, **options)


def check_indexed_version(where: str, info: os.stat_result, footer: CachedFooter,
                          tail: bytes | None = None) -> None:
    """Refuse a file on a filesystem that is no longer the version indexed with `footer`: a
    ParquetFileError naming `where` and what differs (its size, its modification time, or, when
    its last bytes `tail` are given, its footer).

    Args:
        where: the file (and row group) for the message.
        info: the file's stat.
        footer: the footer it was indexed with.
        tail: the file's last `len(footer.tail)` bytes (None: not compared).
    """
    changed = ("size" if info.st_size != footer.size else
               "modification time" if footer.mtime_ns and info.st_mtime_ns != footer.mtime_ns
               else "footer" if tail is not None and tail != footer.tail else None)
    if changed:
        raise ParquetFileError(f"{where} changed since its footer was read (now another "
                               f"{changed}); restart to index it again")


@dataclass(frozen=True)
class _FileVersion:
    """What tells one version of a file on a filesystem from another read at another time."""

    device: int
    inode: int
    size: int
    mtime_ns: int


class ParquetShardReader(ShardReader):
    """The rows of one cached Parquet row group (`path`: `<file>.rgNNNNN`).

    Args:
        path: the cached row group.
        codec: the stream's columns.
        options: `expected_samples`, `expected_bytes` as for ShardReader.
    """

    codec: ParquetCodec

    def __init__(self, path: str | os.PathLike, codec: ParquetCodec, **options: Any) -> None:
        named = split_group_name(Path(path).name)
        if named is None:
            raise ParquetFileError(f"{path}: not a cached Parquet row group's name")
        self.file, self.group = named
        self.bytes_read = 0  # of the row group's ranges, by this reader's decode
        super().__init__(path, codec, **options)  # type: ignore[arg-type]

    def _corrupt(self, what: str) -> ParquetFileError:
        return ParquetFileError(f"{self.file} row group {self.group} ({self.path}): {what}")

    def _open(self) -> None:
        """Open the cached row group; for one read in place, only name the indexed version of
        its file (the cache holds nothing of it, and the file is checked as it is decoded)."""
        if self.codec.in_place is None:
            super()._open()
            return
        footer = self._footer()
        self._identity = (footer.size, hash((footer.mtime_ns, footer.tail)))
        self._offsets = np.zeros(1, np.int64)
        self._num_samples = int(self.expected_samples or 0)

    def _check_size(self, size: int) -> None:
        """Any size: a row group of no projected bytes is empty."""

    def _validate(self, mapped: mmap.mmap, size: int) -> None:
        self._offsets = np.zeros(1, np.int64)  # rows are not byte spans
        self._num_samples = int(self.expected_samples or 0)

    def _key(self) -> tuple:
        return (str(self.path), *self._identity, tuple(self.codec.column_names))

    def columns(self) -> list[Column]:
        """The decoded columns of this row group (decoded on first use in this process)."""
        found = DECODED.get(self._key())
        if found is None:
            found, nbytes = self._decode()
            DECODED.put(self._key(), found, nbytes)
        return found

    def decoded(self) -> bool:
        """Whether this row group's columns are decoded in this process already."""
        return DECODED.get(self._key()) is not None

    def decode(self) -> None:
        """Decode this row group's columns now (kept for this process's reads)."""
        self.columns()

    def _decode(self) -> tuple[list[Column], int]:
        footer = self._footer()
        names, meta = self.codec.column_names, footer.meta
        if not 0 <= self.group < meta.num_row_groups:
            raise self._corrupt(f"the footer has {meta.num_row_groups} row groups")
        span = group_span(meta, self.group, projected_leaves(meta.schema.to_arrow_schema(),
                                                             names), self.file)
        try:
            if self.codec.in_place is not None:
                table = self._read_in_place(footer, names)
            else:
                table = self._read_cached(footer, span, names)
            if table.num_rows != span.rows or table.num_rows != len(self):
                raise self._corrupt(f"decoded {table.num_rows} rows, expected {len(self)}")
            columns = [decode_column(_one_chunk(table.column(name)), kind)
                       for name, kind in zip(names, self.codec.column_encodings)]
        except ParquetFileError:
            raise
        except (OSError, ValueError, TypeError, IndexError) as exc:
            raise self._corrupt(f"does not decode (truncated or corrupt row group): "
                                f"{type(exc).__name__}: {exc}") from None
        self.bytes_read = span.nbytes
        return columns, int(table.nbytes)

    def _footer(self) -> CachedFooter:
        footer = self.path.with_name(Path(self.file).name + FOOTER_SUFFIX)
        try:
            return cached_footer(footer)
        except FileNotFoundError:
            raise self._corrupt(f"its footer {footer} is missing") from None

    def _read_cached(self, footer: CachedFooter, span: RowGroupSpan, names: list[str]) -> Any:
        """The row group decoded from its cached ranges."""
        mapped = self._ensure_open()
        held = os.path.getsize(self.path)
        if span.nbytes != held:
            raise self._corrupt(f"holds {held} bytes, its footer gives {span.nbytes}")
        data = memoryview(mapped)[:span.nbytes] if span.nbytes else b""
        source = RangeFile(data, span.ranges, footer.size)
        return _open_file(source, footer.meta).read_row_group(self.group, columns=names,
                                                              use_threads=False)

    def _read_in_place(self, footer: CachedFooter, names: list[str]) -> Any:
        """The row group decoded from the Parquet file itself (a filesystem source), which
        must still be the file indexed (its size, modification time and footer) before and
        after the read."""
        root = self.codec.in_place or ""
        path = confine(root, Path(root) / self.file, spared=READING)
        before = self._same_file(path, footer)
        table = _open_file(str(path), footer.meta).read_row_group(self.group, columns=names,
                                                                  use_threads=False)
        if self._same_file(path, footer, check_tail=False) != before:
            raise ParquetFileError(f"{self.file} row group {self.group}: {path} was replaced "
                                   "while it was read; restart to index it again")
        return table

    def _same_file(self, path: Path, footer: CachedFooter, check_tail: bool = True
                   ) -> _FileVersion:
        """The version of the file at `path`, once it is the file indexed: ParquetFileError
        naming it and the row group otherwise."""
        where = f"{self.file} row group {self.group}: {path}"
        try:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                tail = (os.pread(handle.fileno(), len(footer.tail), info.st_size -
                                 len(footer.tail)) if check_tail and
                        info.st_size >= len(footer.tail) else footer.tail)
        except FileNotFoundError:
            raise ParquetFileError(f"{where} is gone since its footer was read") from None
        check_indexed_version(where, info, footer, tail)
        return _FileVersion(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def drain_bytes_read(self) -> int:
        """Bytes of the row group this reader decoded from disk since last asked (its ranges,
        once per decode)."""
        nbytes, self.bytes_read = self.bytes_read, 0
        return nbytes

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError("Parquet rows are not byte spans; use get_many")

    def layout(self) -> ShardLayout:
        """A layout of no spans: a Parquet row group is read through `get_many`."""
        self._ensure_open()
        size = 0 if self.codec.in_place is not None else os.fstat(self.fileno()).st_size
        return ShardLayout(self.path, self.codec, np.zeros(1, np.int64), size)

    def _rows(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        n = len(self)
        if rows.size and (rows.min() < -n or rows.max() >= n):
            raise IndexError(f"{self.file} row group {self.group}: row out of range [0, {n})")
        return rows % max(n, 1)

    def get(self, index: int) -> dict[str, Any]:
        return self.get_many([index])[0]

    __getitem__ = get

    def get_many(self, rows: np.ndarray | Sequence[int], *, copy: bool = False
                 ) -> list[dict[str, Any]]:
        """Decoded samples of `rows` (`copy` is accepted: values never view the file)."""
        picked = self._rows(rows)
        with self._text_checked():
            return sample_dicts(self.codec.column_names, self.columns(), picked)

    def get_columns(self, rows: np.ndarray, *, copy: bool = False, views: bool = False
                    ) -> list[Sequence[Any]]:
        """Values of `rows`, column by column (`copy` is accepted: values never view the file;
        with `views`, binary values are read-only memoryviews of the decoded row group, which
        they keep alive, instead of new bytes)."""
        picked = self._rows(rows)
        with self._text_checked():
            return [column.take(picked, views) for column in self.columns()]

    @contextlib.contextmanager
    def _text_checked(self) -> Iterator[None]:
        """A string column's row that is not UTF-8 (made into `str` as it is read) raised as
        ParquetFileError naming this row group."""
        try:
            yield
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"a string column holds a value that is not UTF-8: {exc}"
                                ) from None

    def column_lengths(self, name: str) -> np.ndarray:
        """int64 length of column `name` in every row (as `value_length` counts: elements of
        a list, bytes of str/binary, the value of an integer; 0 for a null)."""
        if name not in self.codec.column_names:
            raise PlanError(f"{self.file}: no column {name!r} (columns: "
                            f"{self.codec.column_names})")
        return column_lengths(self.columns()[self.codec.column_names.index(name)])

    def get_column(self, index: int, name: str) -> Any:
        return self.get(index)[name]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.get_many(np.arange(len(self)))
