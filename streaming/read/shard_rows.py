"""What the read side needs of the rows it reads: one `ShardRows` object that locates sample ids,
opens shard readers, makes shards ready through its `ShardSource` and tallies what was read. The
row reader (`streaming.read.row_reader.RowReader`) is the one implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from streaming.format.rows import RowCodec
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader
from streaming.read.shard_source import ShardSource
from streaming.util.read_sink import ReadSink


@dataclass
class ReadTally:
    """What this process's chunk reads copied out of shards on local disk so far.

    Args:
        bytes_read: the raw bytes of the rows read (a chunk decoded shard by shard adds the
            bytes its decodes read: a Parquet row group's column chunks, once per decode).
        rows: the rows read.
        sink: also told every count (None: nobody).
    """

    bytes_read: int = 0
    rows: int = 0
    sink: ReadSink | None = field(default=None, compare=False, repr=False)

    def add(self, bytes_read: int, rows: int) -> None:
        """Count one chunk read: `rows` rows of `bytes_read` raw bytes (the order of
        `ReadSink.add`)."""
        self.bytes_read += bytes_read
        self.rows += rows
        if self.sink is not None:
            self.sink.add(bytes_read, rows)


class ShardRows(Protocol):
    """The rows of a dataset as the read side reaches them.

    Args:
        source: makes shards ready ahead of the reader (the node cache, or in place).
        tally: counts what chunk reads copied.
    """

    source: ShardSource
    tally: ReadTally

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shard and row of each global sample id in `ids`."""

    def reader(self, shard: int) -> ShardReader:
        """An open reader of `shard`, kept open (made ready on first use)."""

    def codec(self, shard: int) -> SampleCodec | RowCodec | None:
        """The codec the index gives `shard`, known without opening it."""

    def open_file(self, shard: int, path: Path) -> ShardReader:
        """A reader of `shard`'s ready file at `path`, checked against the index."""
