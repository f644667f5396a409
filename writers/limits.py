"""Argument checks every shard writer shares."""

from __future__ import annotations

from streaming.errors import FormatError, SizeLimitError
from streaming.format.compression import parse_compression
from streaming.format.hashing import is_supported_hash
from streaming.util.quantities import parse_bytes

DEFAULT_SIZE_LIMIT = 1 << 26  # raw bytes per shard unless size_limit says otherwise
# Sample offsets are u32: a raw shard must stay below 4 GiB, whatever size_limit says.
MAX_SIZE_LIMIT = (1 << 32) - 1
# Digests every new index records unless `hashes` says otherwise (`hashes=[]`: none, as the
# reference writes by default): cheap, and what lets readers detect a corrupt or replaced file.
DEFAULT_HASHES = ("xxh64",)


def check_compression(compression: str | None) -> str | None:
    """`compression` as given, after checking it names a codec and level (FormatError)."""
    parse_compression(compression)
    return compression


def check_hashes(hashes: list[str] | None, where: str = "hashes=") -> list[str]:
    """`hashes` as a list (None: DEFAULT_HASHES), FormatError naming every unsupported
    algorithm and `where`."""
    algos = list(DEFAULT_HASHES if hashes is None else hashes)
    bad = [algo for algo in algos if not is_supported_hash(algo)]
    if bad:
        raise FormatError(
            f"Invalid hash: {bad[0]}. unsupported hash algorithm(s) "
            f"{', '.join(map(repr, bad))} in {where}...")
    return algos


def check_size_limit(size_limit: int | str | None) -> int | None:
    """`size_limit` in bytes (None: one shard); SizeLimitError unless in [1, 4 GiB)."""
    if size_limit is None:
        return None
    try:
        limit = parse_bytes(size_limit)
    except ValueError as exc:
        raise SizeLimitError(f"size_limit: {exc}") from None
    if limit <= 0:
        raise SizeLimitError(f"size_limit must be positive, got {size_limit!r}")
    if limit > MAX_SIZE_LIMIT:
        raise SizeLimitError(
            f"`size_limit` must be less than 2**32: size_limit={size_limit!r} ({limit} bytes) "
            "is 4 GiB or more: shard sample offsets are u32, so a shard must stay below 2**32 "
            "bytes")
    return limit
