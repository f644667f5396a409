"""Per-sample token counts recorded while writing: one little-endian uint32 side file per shard
(`shard.00000.mds.lengths`) plus one top-level index key describing them.

Existing MDS readers only read "shards" and "version", so the extra key and files are invisible
to them; this project's packers read the lengths without decoding a single sample.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import EncodeError, FormatError
from streaming.format.index import LENGTHS_DTYPE, LENGTHS_SUFFIX, lengths_key
from streaming.format.value_length import value_length
from writers.shard_publish import file_info, write_file_atomic

LengthSpec = str | Callable[[Mapping[str, Any]], int]
_U32_MAX = (1 << 32) - 1


class LengthRecorder:
    """Collect each written sample's length and write one side file per finished shard."""

    def __init__(self, spec: LengthSpec, columns: Mapping[str, str]) -> None:
        if isinstance(spec, str):
            if spec not in columns:
                raise FormatError(
                    f"MDSWriter(lengths={spec!r}): no such column (columns: {sorted(columns)})"
                )
            self.column: str | None = spec
            self._measure: Callable[[Mapping[str, Any]], Any] = lambda s: value_length(s[spec])
            self.function = None
        elif callable(spec):
            self.column = None
            self._measure = spec
            module, name = getattr(spec, "__module__", "?"), getattr(spec, "__qualname__", "?")
            self.function = f"{module}.{name}"
        else:
            raise FormatError(
                f"MDSWriter(lengths=...) takes a column name or a callable, got {spec!r}"
            )
        self._pending: list[int] = []
        self._files: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @classmethod
    def create(cls, spec: LengthSpec | None, columns: Mapping[str, str]) -> LengthRecorder | None:
        """A recorder for `spec`, or None when no lengths are wanted."""
        return None if spec is None else cls(spec, columns)

    def add(self, sample: Mapping[str, Any]) -> None:
        """Record the length of a sample just added to the current shard."""
        length = int(self._measure(sample))
        if not 0 <= length <= _U32_MAX:
            raise EncodeError(f"sample length {length} does not fit the uint32 lengths file")
        self._pending.append(length)

    def take(self) -> np.ndarray:
        """The current shard's lengths (called when the shard is handed off)."""
        out = np.asarray(self._pending, dtype=LENGTHS_DTYPE)
        self._pending = []
        return out

    def write(self, directory: Path, shard_basename: str, lengths: np.ndarray,
              hashes: list[str]) -> None:
        """Write the side file of one shard atomically and remember its index entry."""
        name = shard_basename + LENGTHS_SUFFIX
        data = lengths.astype(LENGTHS_DTYPE, copy=False).tobytes()
        write_file_atomic(directory / name, data)
        with self._lock:
            self._files[shard_basename] = file_info(name, data, hashes)

    def index_extra(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """The top-level index key for `entries` (the shards in index order)."""
        files = [self._files[e["raw_data"]["basename"]] for e in entries]
        return lengths_key(self.column, files, self.function)
