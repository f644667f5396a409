"""Check a dataset's index against the shard files already on local disk, before anything is
planned or allocated from its numbers: sizes, and the sample count in each raw shard's header."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from streaming.errors import ObjectNotFoundError, ShardCorruptError, StreamingError
from streaming.format.index import DatasetIndex

_U32 = struct.Struct("<I")


def file_size(path: Path) -> int | None:
    """The size of `path`, or None when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def size_error(path: Path, expected: int, found: int | None, why: str = "") -> StreamingError:
    """The error for a shard file that is missing (ObjectNotFoundError) or has the wrong size
    (ShardCorruptError), naming the file and both sizes; `why` is appended to the message."""
    if found is None:
        return ObjectNotFoundError(f"{path}: shard file is missing{why}")
    state = "truncated?" if found < expected else "trailing bytes?"
    return ShardCorruptError(f"{path}: file has {found} bytes, the index says {expected} "
                             f"({state}){why}")


def header_samples(path: Path) -> int:
    """The sample count in a raw shard's 4-byte header."""
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 4, 0)
    finally:
        os.close(fd)
    if len(head) < 4:
        raise ShardCorruptError(f"{path}: only {len(head)} bytes; a shard has a 4-byte header")
    return _U32.unpack(head)[0]


def check_local_shards(index: DatasetIndex) -> None:
    """Raise unless every shard of `index` (read in place from `index.root`) is on disk: a raw
    file of the indexed size whose header holds the indexed sample count, or else a compressed
    file of the indexed size (its count is checked when it is decompressed)."""
    for shard in range(index.num_shards):
        raw = index.raw_path(shard)
        raw_bytes = int(index.raw_bytes[shard])
        found = file_size(raw)
        if found == raw_bytes:
            if index.row_codec is not None:  # text formats keep their counts in meta files
                continue
            count, indexed = header_samples(raw), int(index.samples_per_shard[shard])
            if count != indexed:
                raise ShardCorruptError(f"{raw}: header says {count} samples, the index "
                                        f"{index.source} says {indexed}")
            continue
        zipped = index.zip_path(shard)
        if zipped is None:
            raise size_error(raw, raw_bytes, found)
        zip_bytes = int(index.zip_bytes[shard])
        zip_found = file_size(zipped)
        if zip_found != zip_bytes:
            raise size_error(zipped, zip_bytes, zip_found)

