"""Read one raw MDS shard through a read-only mmap, validating its header before trusting it.

Layout: `u32 N`, `u32 offsets[N + 1]` (absolute), the writer's config JSON, then the samples;
sample i is `file[offsets[i]:offsets[i + 1]]` and the last offset is the file size.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streaming.errors import HashMismatchError, IndexFileError, ShardCorruptError
from streaming.format.encodings.encoding import FileBytes
from streaming.format.hashing import file_hexdigests
from streaming.format.sample import SampleCodec

if TYPE_CHECKING:
    from streaming.format.rows import RowCodec

_U32 = struct.Struct("<I")
_PAIR = struct.Struct("<2I")
_SCHEMA_KEYS = ("column_names", "column_encodings", "column_sizes")


class ShardReader:
    """Random access to the samples of one raw shard (zero-copy bytes, decoded dicts).

    Pickling keeps only the path and expectations; the copy re-opens (and re-validates) the file
    on first use, so a reader can be handed to DataLoader worker processes.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        codec: SampleCodec | None = None,
        *,
        expected_samples: int | None = None,
        expected_bytes: int | None = None,
        allow_unsafe_types: bool = False,
    ) -> None:
        self.path = Path(path)
        self.codec = codec
        self.expected_samples = expected_samples
        self.expected_bytes = expected_bytes
        self.allow_unsafe_types = allow_unsafe_types
        self._mmap: mmap.mmap | None = None
        self._file: FileBytes | None = None
        self._fd: int | None = None  # for positional reads (get_columns(copy=True))
        self._identity: tuple[int, int] = (0, 0)  # device and inode of the validated file
        self._spans: np.ndarray | None = None  # int64 copy of the offsets, for get_columns
        self._offsets: np.ndarray | None = None
        self._config: dict[str, Any] = {}
        self._num_samples = 0
        self._open()

    def _corrupt(self, what: str) -> ShardCorruptError:
        return ShardCorruptError(f"{self.path}: {what}")

    def _open(self) -> None:
        with open(self.path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            self._identity = (stat.st_dev, stat.st_ino)
            if self.expected_bytes is not None and size != self.expected_bytes:
                raise self._corrupt(f"file has {size} bytes, the index says {self.expected_bytes}")
            self._check_size(size)
            # An empty file (a text-format shard of no rows) cannot be mapped: one zero byte
            # stands in for it.
            mapped = (mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size
                      else mmap.mmap(-1, 1))
        try:
            self._validate(mapped, size)
        except BaseException:
            self._offsets = None
            # The traceback may still hold a view; then the mapping dies with the traceback.
            with contextlib.suppress(BufferError):
                mapped.close()
            raise
        self._mmap = mapped
        self._file = FileBytes(mapped)

    def _check_size(self, size: int) -> None:
        """Refuse a file too short for this format before it is mapped."""
        if size < 4:
            raise self._corrupt(f"only {size} bytes; a shard has at least a 4-byte header")

    def _validate(self, mapped: mmap.mmap, size: int) -> None:
        (count,) = _U32.unpack_from(mapped, 0)
        if self.expected_samples is not None and count != self.expected_samples:
            raise self._corrupt(f"header says {count} samples, the index says "
                                f"{self.expected_samples}")
        table_end = 4 + 4 * (count + 1)
        if table_end > size:
            raise self._corrupt(f"offset table of {count} samples ends at byte {table_end}, "
                                f"past the end of the {size}-byte file (truncated?)")
        offsets = np.frombuffer(mapped, "<u4", count + 1, 4)
        first, last = int(offsets[0]), int(offsets[-1])
        if first < table_end or first > size:
            raise self._corrupt(f"first sample offset {first} is outside [{table_end}, {size}]")
        if count and not bool(np.all(offsets[1:] >= offsets[:-1])):
            bad = int(np.argmax(offsets[1:] < offsets[:-1]))
            raise self._corrupt(f"offsets decrease at sample {bad} "
                                f"({int(offsets[bad])} -> {int(offsets[bad + 1])})")
        if last != size:
            raise self._corrupt(f"last offset {last} != file size {size} "
                                f"({'truncated' if last > size else 'trailing bytes'})")
        self._offsets = offsets
        self._config = self._parse_config(bytes(mapped[table_end:first]))
        self._num_samples = count
        self._check_schema()

    def _parse_config(self, raw: bytes) -> dict[str, Any]:
        try:
            config = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._corrupt(f"embedded config is not valid JSON: {exc}") from None
        if not isinstance(config, dict) or not all(k in config for k in _SCHEMA_KEYS):
            raise self._corrupt(f"embedded config lacks {', '.join(_SCHEMA_KEYS)}")
        return config

    def _check_schema(self) -> None:
        config = self._config
        if self.codec is None:
            try:
                self.codec = SampleCodec(
                    config["column_names"], config["column_encodings"], config["column_sizes"],
                    allow_unsafe_types=self.allow_unsafe_types,
                )
            except (TypeError, ValueError) as exc:  # FormatError, UnsafeType... are ValueErrors
                if not type(exc).__module__.startswith("streaming"):
                    raise self._corrupt(f"embedded config has a bad column schema: {exc}") from None
                raise type(exc)(f"{self.path}: {exc}") from None
            return
        ours = (self.codec.column_names, self.codec.column_encodings, self.codec.column_sizes)
        theirs = tuple(config[key] for key in _SCHEMA_KEYS)
        if list(ours) != list(theirs):
            raise self._corrupt(
                f"embedded columns {dict(zip(theirs[0], theirs[1]))} differ from the index's "
                f"{self.codec.columns}"
            )

    def _ensure_open(self) -> mmap.mmap:
        if self._mmap is None:
            self._open()
        return self._mmap  # type: ignore[return-value]

    def __len__(self) -> int:
        return self._num_samples

    @property
    def offsets(self) -> np.ndarray:
        """The `N + 1` absolute sample offsets (a read-only view of the file)."""
        self._ensure_open()
        return self._offsets  # type: ignore[return-value]

    @property
    def config(self) -> dict[str, Any]:
        """The writer config embedded in the shard header."""
        self._ensure_open()
        return self._config

    @property
    def sample_sizes(self) -> np.ndarray:
        """Encoded byte size of every sample (int64)."""
        return np.diff(self.offsets.astype(np.int64))

    def sample_bytes(self, index: int) -> memoryview:
        """Sample `index`'s bytes as a zero-copy view of the mapped file."""
        mapped = self._ensure_open()
        if not 0 <= index < self._num_samples:
            if -self._num_samples <= index < 0:
                index += self._num_samples
            else:
                raise IndexError(f"{self.path}: sample {index} out of range "
                                 f"[0, {self._num_samples})")
        start, end = _PAIR.unpack_from(mapped, 4 + 4 * index)
        return memoryview(mapped)[start:end]

    def get(self, index: int) -> dict[str, Any]:
        """Decoded sample `index` (ndarray columns are zero-copy, read-only views)."""
        data = self.sample_bytes(index)
        try:
            return self.codec.decode(data)  # type: ignore[union-attr]
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self._corrupt(f"sample {index} does not decode: {type(exc).__name__}: {exc}") \
                from exc

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and end byte (int64) of each row; IndexError naming the shard if out of range."""
        self._ensure_open()
        if self._spans is None:
            self._spans = self._offsets.astype(np.int64)  # type: ignore[union-attr]
        return _spans_of(self._spans, rows, self.path)

    def layout(self) -> ShardLayout:
        """What reading this validated shard by position needs, detached from the open file."""
        self._ensure_open()
        size = int(self._offsets[-1])  # type: ignore[index]
        return ShardLayout(self.path, self.codec, self._offsets.astype(np.int64), size)

    def fileno(self) -> int:
        """A descriptor of the shard for positional reads (closed by `close`)."""
        self._ensure_open()
        if self._fd is None:
            fd = os.open(self.path, os.O_RDONLY)
            stat = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) != self._identity:
                os.close(fd)  # offsets validated for the old file would misread the new one
                raise self._corrupt("the file was replaced after it was validated")
            self._fd = fd
        return self._fd

    def decoded(self) -> bool:
        """Whether reading rows needs no decode of the whole shard first (always, for an MDS
        shard: its rows are decoded as they are read)."""
        return True

    def decode(self) -> None:
        """Decode the whole shard now, where reading its rows needs that first (nothing to do
        for an MDS shard)."""

    def drain_bytes_read(self) -> int:
        """Bytes this reader read from disk outside the chunk reads' positional copies since
        last asked (none for an MDS shard: its rows are copied as byte spans)."""
        return 0

    def get_columns(self, rows: np.ndarray, *, copy: bool = False, views: bool = False
                    ) -> list[Sequence[Any]]:
        """Decode many samples at once, column by column (codec column order): the batch path.

        Equivalent to `get` on each row; a corrupt sample raises the same error `get` would.
        With `copy`, the rows' bytes are first copied into one new buffer (`read_spans`) and
        the values are views of it: writable, and no file page gets mapped into this process;
        with `views` too, `bytes` values are memoryviews of that buffer (never of the file).
        """
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.spans(rows)
        file = self._file
        if copy and len(rows):
            file, starts, ends = read_spans([self.fileno()], np.zeros(len(rows), np.int64),
                                            starts, ends, str(self.path))
        try:
            return self.codec.decode_columns(file, starts, ends,  # type: ignore
                                             views=views and copy)
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self.explain(rows, exc) from exc

    def explain(self, rows: np.ndarray, exc: Exception) -> Exception:
        """The precise error of the first row that does not decode (as `get` raises it)."""
        for row in np.asarray(rows).tolist():
            try:
                self.get(row)
            except Exception as precise:
                return precise
        return self._corrupt(f"samples do not decode: {type(exc).__name__}: {exc}")

    def get_many(self, rows: np.ndarray | Sequence[int], *, copy: bool = False
                 ) -> list[dict[str, Any]]:
        """Decoded samples for many rows (what `[get(r) for r in rows]` returns, faster;
        `copy` as in `get_columns`)."""
        columns = self.get_columns(np.asarray(rows), copy=copy)
        return samples_of(self.codec.column_names, columns)  # type: ignore[union-attr]

    def get_column(self, index: int, name: str) -> Any:
        """Decode only column `name` of sample `index`."""
        data = self.sample_bytes(index)
        try:
            return self.codec.decode_column(data, name)  # type: ignore[union-attr]
        except KeyError:
            raise
        except Exception as exc:
            raise self._corrupt(f"sample {index} column {name!r} does not decode: {exc}") \
                from exc

    __getitem__ = get

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index in range(self._num_samples):
            yield self.get(index)

    def close(self) -> None:
        """Unmap the file. Views still held by the caller keep the mapping alive until dropped."""
        mapped, self._mmap, self._offsets, self._file = self._mmap, None, None, None
        self._spans = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if mapped is not None:
            # Exported views outlive us; the mapping is then freed with the last of them.
            with contextlib.suppress(BufferError):
                mapped.close()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_mmap=None, _offsets=None, _file=None, _spans=None, _fd=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"ShardReader({str(self.path)!r}, samples={self._num_samples})"


class ShardLayout:
    """A validated shard's path, codec, size and sample offsets, kept without its file open, so
    a shard that may be evicted between reads is re-read by position without re-validating."""

    __slots__ = ("codec", "offsets", "path", "size")

    def __init__(self, path: Path, codec: SampleCodec | RowCodec, offsets: np.ndarray,
                 size: int) -> None:
        self.path = path
        self.codec = codec
        self.offsets = offsets
        self.size = size

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes)

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and end byte (int64) of each row; IndexError naming the shard if out of range."""
        return _spans_of(self.offsets, rows, self.path)

    def open(self) -> int:
        """A read-only descriptor of the file, checked to still have the validated size."""
        fd = os.open(self.path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        if size != self.size:
            os.close(fd)
            raise ShardCorruptError(f"{self.path}: file has {size} bytes, it had {self.size} "
                                    f"when it was validated")
        return fd


def _spans_of(offsets: np.ndarray, rows: np.ndarray, path: Path) -> tuple[np.ndarray, np.ndarray]:
    rows = np.asarray(rows, dtype=np.int64)
    n = len(offsets) - 1
    if rows.size and int(rows.view(np.uint64).max()) >= n:  # negatives wrap to huge
        bad = int(rows[(rows < 0) | (rows >= n)][0])
        raise IndexError(f"{path}: sample {bad} out of range [0, {n})")
    return offsets[rows], offsets[rows + 1]


def samples_of(names: Sequence[str], columns: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Per-sample dicts from decoded columns."""
    samples: list[dict[str, Any]] = [{} for _ in range(len(columns[0]) if columns else 0)]
    for name, values in zip(names, columns):
        for sample, value in zip(samples, values):
            sample[name] = value
    return samples


# preadv2 flag: fail with EAGAIN instead of waiting for the disk (Linux 4.14+); 0 elsewhere, and
# then NOWAIT_READS is False so callers never ask for it.
NOWAIT = getattr(os, "RWF_NOWAIT", 0)
NOWAIT_READS = bool(NOWAIT)


def read_spans(fds: Sequence[int], which: np.ndarray, starts: np.ndarray, ends: np.ndarray,
               what: str = "shard", *, nowait: bool = False
               ) -> tuple[FileBytes, np.ndarray, np.ndarray]:
    """Copy span k (bytes [starts[k], ends[k]) of file fds[which[k]]) into one new buffer, in
    order, with positional reads (file-contiguous neighbours merged into one read); return the
    buffer and each span's start and end in it.

    Reading instead of touching the mmap keeps file pages out of this process's RSS: with large
    page-cache folios one random 4 KB row would map a whole folio of hundreds of KB. With
    `nowait` (Linux), a read that would wait for the disk raises BlockingIOError instead
    (RWF_NOWAIT: page cache only).
    """
    places = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(ends - starts, out=places[1:])
    buffer = bytearray(int(places[-1]))
    lo, hi = places[:-1], places[1:]
    read_spans_into(memoryview(buffer), fds, which, starts, ends, lo, hi, what, nowait=nowait)
    return FileBytes(buffer), lo, hi


def read_spans_into(view: memoryview, fds: Sequence[int], which: np.ndarray, starts: np.ndarray,
                    ends: np.ndarray, lo: np.ndarray, hi: np.ndarray, what: str = "shard", *,
                    nowait: bool = False) -> None:
    """`read_spans` into a given buffer: span k lands at view[lo[k]:hi[k]]; neighbours are
    merged into one read where they are contiguous both in the file and in the buffer."""
    cuts = np.flatnonzero((starts[1:] != ends[:-1]) | (which[1:] != which[:-1])
                          | (lo[1:] != hi[:-1])) + 1
    first = np.concatenate(([0], cuts))
    last = np.append(cuts, len(starts)) - 1
    flags = NOWAIT if nowait else 0
    for a, b, at, k in zip(lo[first].tolist(), hi[last].tolist(),
                           starts[first].tolist(), which[first].tolist()):
        if os.preadv(fds[k], [view[a:b]], at, flags) != b - a:
            if nowait:  # partly in the page cache: let a blocking read do it
                raise BlockingIOError(f"{what}: bytes at offset {at} are not in the page cache")
            raise ShardCorruptError(f"{what}: short read of {b - a} bytes at offset {at}")


def validate_file(
    path: str | os.PathLike,
    expected_bytes: int | None,
    hashes: Mapping[str, str],
    algos: Iterable[str] = (),
) -> None:
    """Check a file's size and its digests for `algos` against the index's `hashes`."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ShardCorruptError(f"{path}: file is missing") from None
    if expected_bytes is not None and size != expected_bytes:
        raise ShardCorruptError(f"{path}: file has {size} bytes, the index says {expected_bytes}")
    algos = list(algos)
    missing = [algo for algo in algos if algo not in hashes]
    if missing:
        raise IndexFileError(
            f"{path}: the index records no {', '.join(missing)} digest for this file "
            f"(it has: {', '.join(sorted(hashes)) or 'none'})"
        )
    if not algos:
        return
    for algo, digest in file_hexdigests(algos, path).items():
        if digest != hashes[algo].lower():
            raise HashMismatchError(
                f"{path}: {algo} digest {digest} != {hashes[algo]} recorded in the index"
            )
