"""The in-sample layout of MDS v2: u32 lengths of the variable columns, then every payload.

`SampleCodec` precomputes, per column, where its bytes start given the variable lengths, so
decoding a sample is one `struct.unpack_from` plus one slice and decode per column.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streaming.errors import EncodeError, FormatError, ShardCorruptError, UnsafeTypeError
from streaming.format.encodings import Encoding, get_encoding
from streaming.format.encodings.encoding import FileBytes

_U32 = np.dtype("<u4")


class SampleCodec:
    """Encode and decode whole samples for one column schema (names in on-disk order)."""

    def __init__(
        self,
        column_names: Sequence[str],
        column_encodings: Sequence[str],
        column_sizes: Sequence[int | None] | None = None,
        *,
        allow_unsafe_types: bool = False,
    ) -> None:
        names, encodings = list(column_names), list(column_encodings)
        if len(names) != len(encodings):
            raise FormatError(
                f"{len(names)} column names but {len(encodings)} column encodings"
            )
        if len(set(names)) != len(names):
            raise FormatError(f"duplicate column names in {names}")
        codecs = [get_encoding(name) for name in encodings]
        sizes = [codec.size for codec in codecs]
        if column_sizes is not None and list(column_sizes) != sizes:
            raise FormatError(
                f"column sizes {list(column_sizes)} disagree with encodings {encodings} "
                f"(expected {sizes})"
            )
        for name, codec in zip(names, codecs):
            if codec.unsafe and not allow_unsafe_types:
                raise UnsafeTypeError(
                    f"column {name!r} uses the unsafe encoding {codec.name!r} (pickle can run "
                    "arbitrary code); pass allow_unsafe_types=True if you trust this data"
                )
        self.column_names: list[str] = names
        self.column_encodings: list[str] = encodings
        self.column_sizes: list[int | None] = sizes
        self.allow_unsafe_types = allow_unsafe_types
        self._codecs: list[Encoding] = codecs
        self._num_var = sum(size is None for size in sizes)
        self._lengths = struct.Struct(f"<{self._num_var}I")
        self._header = self._lengths.size
        # Per column: (name, decode, fixed size or None, index among the variable columns).
        plan, var_index = [], 0
        for name, codec in zip(names, codecs):
            plan.append((name, codec.decode, codec.size, var_index if codec.size is None else -1))
            var_index += codec.size is None
        self._plan = tuple(plan)
        self._position = {name: i for i, name in enumerate(names)}

    @classmethod
    def from_columns(
        cls, columns: Mapping[str, str], *, allow_unsafe_types: bool = False
    ) -> SampleCodec:
        """Codec for `{name: encoding}`, columns sorted by name as the reference writer does."""
        names = sorted(columns)
        return cls(names, [columns[n] for n in names], allow_unsafe_types=allow_unsafe_types)

    @property
    def columns(self) -> dict[str, str]:
        """`{name: encoding}` in on-disk order."""
        return dict(zip(self.column_names, self.column_encodings))

    @property
    def fixed_size(self) -> int | None:
        """Encoded size of every sample when all columns are fixed-size, else None."""
        if self._num_var:
            return None
        return sum(self.column_sizes)  # type: ignore[arg-type]

    def encode(self, sample: Mapping[str, Any]) -> bytes:
        """Encode one sample (extra keys are ignored; a missing column raises EncodeError)."""
        payloads, lengths = [], []
        for name, codec in zip(self.column_names, self._codecs):
            try:
                value = sample[name]
            except KeyError:
                raise EncodeError(
                    f"sample has no column {name!r} (columns: {self.column_names})"
                ) from None
            try:
                data = codec.encode(value)
            except EncodeError as exc:
                raise EncodeError(f"column {name!r}: {exc}") from exc
            if codec.size is None:
                if len(data) >= 1 << 32:
                    raise EncodeError(f"column {name!r}: {len(data)} bytes exceed the u32 limit")
                lengths.append(len(data))
            elif len(data) != codec.size:
                raise EncodeError(
                    f"column {name!r}: {codec.name} produced {len(data)} bytes, "
                    f"expected {codec.size}"
                )
            payloads.append(data)
        return b"".join([self._lengths.pack(*lengths), *payloads])

    def decode(self, buf: memoryview | bytes) -> dict[str, Any]:
        """Decode one sample's bytes into `{column: value}`."""
        view = memoryview(buf)
        lengths = self._lengths.unpack_from(view)
        pos = self._header
        out = {}
        for name, decode, size, var_index in self._plan:
            end = pos + (lengths[var_index] if size is None else size)
            out[name] = decode(view[pos:end])
            pos = end
        if pos != len(view):
            raise ShardCorruptError(
                f"columns end at byte {pos} but the sample has {len(view)} bytes")
        return out

    def decode_columns(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray, *,
                       views: bool = False) -> list[Sequence[Any]]:
        """Decode many samples at once, column by column (in on-disk order).

        `starts`/`ends` (int64) are the samples' byte spans in `file`. Column spans come from
        one vectorised read of every sample's length header; a sample whose columns do not
        exactly fill its span raises ValueError naming its position in `starts`. With `views`,
        `bytes` values are memoryviews of `file` (see `Encoding.view_many`).
        """
        n = len(starts)
        pos = starts + self._header
        if self._num_var:
            lengths = file.gather(starts, self._header).view(_U32).reshape(n, self._num_var)
            lengths = lengths.astype(np.int64)
        spans = []
        for _, _, size, var_index in self._plan:
            end = pos + (lengths[:, var_index] if size is None else size)
            spans.append((pos, end))
            pos = end
        bad = np.flatnonzero(pos != ends)
        if len(bad):
            k = int(bad[0])
            raise ShardCorruptError(
                f"sample {k} of the batch: columns end at byte {int(pos[k])} but the sample "
                f"ends at byte {int(ends[k])}")
        if views:
            return [codec.view_many(file, a, b) for codec, (a, b) in zip(self._codecs, spans)]
        return [codec.decode_many(file, a, b) for codec, (a, b) in zip(self._codecs, spans)]

    def column_span(self, buf: memoryview | bytes, name: str) -> tuple[int, int]:
        """Start and end byte of column `name` inside one sample's bytes."""
        try:
            index = self._position[name]
        except KeyError:
            raise KeyError(f"no column {name!r} (columns: {self.column_names})") from None
        lengths = self._lengths.unpack_from(buf)
        pos = self._header
        for _, _, size, var_index in self._plan[:index]:
            pos += lengths[var_index] if size is None else size
        _, _, size, var_index = self._plan[index]
        return pos, pos + (lengths[var_index] if size is None else size)

    def decode_column(self, buf: memoryview | bytes, name: str) -> Any:
        """Decode only column `name` of one sample (cheaper than a full decode)."""
        start, end = self.column_span(buf, name)
        return self._codecs[self._position[name]].decode(memoryview(buf)[start:end])

    def __reduce__(self) -> tuple:
        # struct.Struct is not picklable; rebuilding from the schema is cheap.
        schema = (self.column_names, self.column_encodings, self.column_sizes)
        return (_rebuild, (*schema, self.allow_unsafe_types))

    def __repr__(self) -> str:
        return f"SampleCodec({self.columns})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SampleCodec) and (
            other.column_names == self.column_names
            and other.column_encodings == self.column_encodings
        )

    def __hash__(self) -> int:
        return hash((tuple(self.column_names), tuple(self.column_encodings)))


def _rebuild(
    names: list[str], encodings: list[str], sizes: list[int | None], allow_unsafe_types: bool
) -> SampleCodec:
    return SampleCodec(names, encodings, sizes, allow_unsafe_types=allow_unsafe_types)
