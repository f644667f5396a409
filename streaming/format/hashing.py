"""Digests recorded in index.json: hashlib's fixed-length algorithms plus the xxhash family."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import xxhash

from streaming.errors import UnknownHashError

_XXHASH = {
    "xxh32": xxhash.xxh32,
    "xxh64": xxhash.xxh64,
    "xxh3_64": xxhash.xxh3_64,
    "xxh3_128": xxhash.xxh3_128,
    "xxh128": xxhash.xxh128,
}
# shake_* need an output length, so index.json cannot name them.
_HASHLIB = frozenset(a for a in hashlib.algorithms_guaranteed if not a.startswith("shake_"))
SUPPORTED_HASHES: frozenset[str] = _HASHLIB | frozenset(_XXHASH)
_CHUNK = 8 << 20


def is_supported_hash(algo: str) -> bool:
    """Whether `algo` can be written to or verified from index.json."""
    return algo in SUPPORTED_HASHES


def new_hasher(algo: str) -> Any:
    """A fresh incremental hasher (`update`, `hexdigest`) for `algo`; unknown -> ValueError."""
    maker = _XXHASH.get(algo)
    if maker is not None:
        return maker()
    if algo in _HASHLIB:
        return hashlib.new(algo)
    raise UnknownHashError(
        f"unknown hash algorithm {algo!r}; supported: {sorted(SUPPORTED_HASHES)}")


def hexdigest(algo: str, data: bytes | memoryview) -> str:
    """Hex digest of `data` with `algo`."""
    hasher = new_hasher(algo)
    hasher.update(data)
    return hasher.hexdigest()


def file_hexdigests(algos: list[str] | tuple[str, ...], path: str | os.PathLike) -> dict[str, str]:
    """Hex digests of a file for several algorithms in one streamed pass (8 MiB chunks)."""
    hashers = {algo: new_hasher(algo) for algo in algos}
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(buffer):
            for hasher in hashers.values():
                hasher.update(view[:size])
    return {algo: hasher.hexdigest() for algo, hasher in hashers.items()}


def file_hexdigest(algo: str, path: str | os.PathLike) -> str:
    """Hex digest of a whole file, streamed in 8 MiB chunks."""
    return file_hexdigests([algo], path)[algo]


# Digests fast enough (several GB/s) that a download is checked against one whenever the index
# records it, without `validate_hash`; the first one recorded is used.
FAST_HASHES = ("xxh3_64", "xxh64", "xxh3_128", "xxh128")


def download_digest(hashes: dict[str, str], algo: str | None) -> dict[str, str] | None:
    """The digest a downloaded file is checked against: `algo`'s when given (the caller makes
    sure the index records it), else the first of FAST_HASHES the index records, else None."""
    if algo:
        return {algo: hashes[algo]} if algo in hashes else None
    fast = next((name for name in FAST_HASHES if name in hashes), None)
    return None if fast is None else {fast: hashes[fast]}
