"""Turn a finished shard's bytes into files on disk (raw or compressed) plus its index entry.

Runs on worker threads: zstd and hashlib release the GIL, so shards compress and hash in
parallel with the caller encoding the next one. Files appear under their final name only when
complete (written to a temporary name, then renamed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import zstandard

from streaming.format.compression import compress, extension, parse_compression
from streaming.format.encodings import encoding_size
from streaming.format.hashing import hexdigest
from streaming.util.atomic import atomic_output
from streaming.util.disk_full import naming_full_disk
from streaming.util.pagewrite import write_sliced

TMP_SUFFIX = ".tmp"  # how atomic_output's temporary files end


def shard_config(
    names: Sequence[str],
    encodings: Sequence[str],
    compression: str | None,
    hashes: Sequence[str],
    size_limit: int | None,
) -> dict[str, Any]:
    """The writer config that every shard header embeds and every index entry repeats."""
    return {
        "column_encodings": list(encodings),
        "column_names": list(names),
        "column_sizes": [encoding_size(e) for e in encodings],
        "compression": compression,
        "format": "mds",
        "hashes": list(hashes),
        "size_limit": size_limit,
        "version": 2,
    }


def config_json(config: dict[str, Any]) -> bytes:
    """The config as the shard header stores it: sorted keys, default JSON separators."""
    return json.dumps(config, sort_keys=True).encode("utf-8")


def zip_basename(basename: str, compression: str) -> str:
    """Name of the compressed file: the raw name plus the codec's extension."""
    return f"{basename}.{extension(compression)}"


def write_file_atomic(path: Path, data: bytes | memoryview) -> None:
    """Publish `data` at `path` through a temporary sibling (`atomic_output`, no fsync: see
    docs/writing.md); a full disk is a DiskFullError naming the file."""
    with naming_full_disk(path, len(data)), atomic_output(path, durable=False) as f:
        write_sliced(f, data)


def file_info(basename: str, data: bytes | memoryview, hashes: Sequence[str]) -> dict[str, Any]:
    """A file's index entry: its name, size and digests."""
    return {
        "basename": basename,
        "bytes": len(data),
        "hashes": {algo: hexdigest(algo, data) for algo in hashes},
    }


def _compress(compression: str, raw: memoryview) -> bytes:
    codec, level = parse_compression(compression)
    if codec == "zstd":
        # One thread per shard: the writer already compresses shards in parallel, and zstd's
        # own threads would cost more CPU. The frame carries its content checksum, so a reader
        # detects a corrupt shard even when the index records no digest.
        return zstandard.ZstdCompressor(level=level, write_checksum=True).compress(raw)
    return compress(compression, raw)


def write_shard(
    directory: Path, basename: str, raw: memoryview, samples: int, config: dict[str, Any]
) -> dict[str, Any]:
    """Write one shard (compressed if the config says so) and return its index.json entry."""
    compression = config["compression"]
    hashes = config["hashes"]
    raw_info = file_info(basename, raw, hashes)
    zip_info = None
    if compression is None:
        write_file_atomic(directory / basename, raw)
    else:
        packed = _compress(compression, raw)
        name = zip_basename(basename, compression)
        write_file_atomic(directory / name, packed)
        zip_info = file_info(name, packed, hashes)
    return {**config, "raw_data": raw_info, "samples": samples, "zip_data": zip_info}
