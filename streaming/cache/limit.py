"""The smallest cache_limit a node plan can run within, and the start-up check against it. Pure.

Model: the node's readers advance in lock-step, one sample per step each. At step t the shards
of every reader's current sample are in use at once and must all be resident; at most one more
of them is being decompressed, which costs its compressed bytes on top (they are reserved for
the whole download). So the minimum is max over t of the resident bytes of the in-use shards
plus the largest transient among them, plus whatever else already lies in the cache folders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streaming.errors import CacheLimitError, PlanError

CHUNK = 1 << 16  # steps per vectorised block (bounds memory to CHUNK x readers int64s)


@dataclass(frozen=True)
class Footprint:
    """Bytes per shard: `resident` while cached, `transient` extra while being prepared."""

    resident: np.ndarray
    transient: np.ndarray

    @classmethod
    def of(cls, raw_bytes: np.ndarray, zip_bytes: np.ndarray, keep_zip: np.ndarray,
           cached: np.ndarray, slack: int = 0, zipless: np.ndarray | None = None) -> Footprint:
        """From index sizes: a kept zip stays resident, otherwise it only exists in transit,
        and not even then for `zipless` shards (decompressed while they download, or straight
        from a filesystem remote).

        Shards that are not `cached` (their only copy is local) cost nothing. `slack` is added to
        each transient for small files a download creates (lock files).
        """
        raw = np.asarray(raw_bytes, np.int64)
        zipped = np.asarray(zip_bytes, np.int64)
        keep = np.asarray(keep_zip, bool)
        cached = np.asarray(cached, bool)
        on_disk = ~keep if zipless is None else ~keep & ~np.asarray(zipless, bool)
        resident = np.where(cached, raw + np.where(keep, zipped, 0), 0)
        transient = np.where(cached, np.where(on_disk, zipped, 0) + slack, 0)
        return cls(resident.astype(np.int64), transient.astype(np.int64))

    def download_cost(self, shard: int) -> int:
        """Bytes to reserve before preparing `shard` (everything it will ever occupy at once)."""
        return int(self.resident[shard] + self.transient[shard])


@dataclass(frozen=True)
class MinimumLimit:
    """The smallest workable limit and the step and shards that set it."""

    bytes: int
    step: int
    shards: tuple[int, ...]


def reader_shards(ids: np.ndarray, shard_starts: np.ndarray) -> np.ndarray:
    """Global sample ids [..., n] (-1 padding) -> shard ids of the same shape (-1 kept)."""
    ids = np.asarray(ids, np.int64)
    shards = np.searchsorted(np.asarray(shard_starts, np.int64), ids, side="right") - 1
    return np.where(ids >= 0, shards, -1)


def minimum_limit(shards: np.ndarray, footprint: Footprint,
                  shard_starts: np.ndarray | None = None) -> MinimumLimit:
    """Minimum limit for readers reading `shards[..., reader, step]` (-1 = idle) in lock-step.

    With `shard_starts`, the array holds global sample ids instead (a NodePlan's `ids`); they
    are mapped to shards a block of steps at a time, so memory stays bounded for huge plans.
    """
    best = MinimumLimit(0, 0, ())
    arr = np.asarray(shards, np.int64)
    if not arr.size:
        return best
    grid = arr.reshape(-1, arr.shape[-1])
    resident = np.append(footprint.resident, 0)  # index -1 -> the appended zero
    transient = np.append(footprint.transient, 0)
    for start in range(0, grid.shape[1], CHUNK):
        block = grid[:, start:start + CHUNK]
        if shard_starts is not None:
            block = reader_shards(block, shard_starts)
        block = np.sort(block.T, axis=1)  # [steps, readers]
        repeat = np.zeros_like(block, bool)
        repeat[:, 1:] = block[:, 1:] == block[:, :-1]
        kept = np.where(repeat, -1, block)
        need = resident[kept].sum(axis=1) + transient[kept].max(axis=1, initial=0)
        if len(need) and int(need.max()) > best.bytes:
            t = int(need.argmax())
            ids = tuple(int(s) for s in kept[t] if s >= 0)
            best = MinimumLimit(int(need[t]), start + t, ids)
    return best


def check_cache_limit(value: int | str) -> int:
    """The bytes of a `cache_limit` argument; PlanError for one that is not a positive size (0
    is refused rather than taken to mean anything: None is the way to say "no limit")."""
    from streaming.util.quantities import parse_bytes

    try:
        limit = parse_bytes(value)
    except ValueError as exc:
        raise PlanError(f"cache_limit={value!r}: {exc}") from None
    if limit <= 0:
        raise PlanError(f"cache_limit must be a positive size such as '10gb', got {value!r} "
                        "(None, the default, means no limit)")
    return limit


def check_limit(limit: int, minimum: MinimumLimit, *, other_bytes: int = 0,
                where: str = "the cache") -> None:
    """Raise CacheLimitError when `limit` cannot hold the plan (the message gives the minimum)."""
    needed = minimum.bytes + other_bytes
    if limit >= needed:
        return
    raise CacheLimitError(
        f"Minimum cache usage ({needed} bytes) is larger than the cache limit ({limit} bytes): "
        f"cache_limit={limit} bytes ({_human(limit)}) is too small for this node's plan: it "
        f"needs at least {needed} bytes ({_human(needed)}): {minimum.bytes} for the "
        f"{len(minimum.shards)} shard(s) its readers use at once at step {minimum.step} "
        f"(shards {list(minimum.shards)[:8]}), including one being decompressed, plus "
        f"{other_bytes} bytes of other files already in {where}")


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"
