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

from streaming.errors import CacheLimitError

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
    """The smallest workable limit and the step and shards that set it; `whole`, the bytes
    that hold every shard the plan reads at once (with the largest one in preparation): from
    there on nothing is evicted and each shard is downloaded once."""

    bytes: int
    step: int
    shards: tuple[int, ...]
    whole: int = 0

    def plus(self, other_bytes: int) -> MinimumLimit:
        """The same with `other_bytes` of other files in the cache folders added."""
        return MinimumLimit(self.bytes + other_bytes, self.step, self.shards,
                            self.whole + other_bytes)


def reader_shards(ids: np.ndarray, shard_starts: np.ndarray) -> np.ndarray:
    """Global sample ids [..., n] (-1 padding) -> shard ids of the same shape (-1 kept)."""
    ids = np.asarray(ids, np.int64)
    shards = np.searchsorted(np.asarray(shard_starts, np.int64), ids, side="right") - 1
    return np.where(ids >= 0, shards, -1)


def minimum_limit(shards: np.ndarray, footprint: Footprint,
                  shard_starts: np.ndarray | None = None, unit: int = 1) -> MinimumLimit:
    """Minimum limit for readers reading `shards[..., reader, step]` (-1 = idle) in lock-step,
    `unit` samples a step each (a reader's read is at least one batch, and the shards of a
    read are wanted together: `unit` is the batch size for a node plan).

    With `shard_starts`, the array holds global sample ids instead (a NodePlan's `ids`); they
    are mapped to shards a block of steps at a time, so memory stays bounded for huge plans.
    """
    best = MinimumLimit(0, 0, ())
    arr = np.asarray(shards, np.int64)
    if not arr.size:
        return best
    grid = arr.reshape(-1, arr.shape[-1])
    unit = max(int(unit), 1)
    if grid.shape[1] % unit:
        pad = np.full((grid.shape[0], unit - grid.shape[1] % unit), -1, np.int64)
        grid = np.concatenate([grid, pad], axis=1)
    resident = np.append(footprint.resident, 0)  # index -1 -> the appended zero
    transient = np.append(footprint.transient, 0)
    read = np.zeros(len(resident), bool)
    span = max(CHUNK // unit, 1) * unit
    for start in range(0, grid.shape[1], span):
        block = grid[:, start:start + span]
        if shard_starts is not None:
            block = reader_shards(block, shard_starts)
        read[block] = True
        readers, n = block.shape
        steps = block.reshape(readers, n // unit, unit).transpose(1, 0, 2).reshape(n // unit, -1)
        steps = np.sort(steps, axis=1)  # [steps, readers x unit]
        repeat = np.zeros_like(steps, bool)
        repeat[:, 1:] = steps[:, 1:] == steps[:, :-1]
        kept = np.where(repeat, -1, steps)
        need = resident[kept].sum(axis=1) + transient[kept].max(axis=1, initial=0)
        if len(need) and int(need.max()) > best.bytes:
            t = int(need.argmax())
            ids = tuple(int(s) for s in kept[t] if s >= 0)
            best = MinimumLimit(int(need[t]), start // unit + t, ids)
    read[-1] = False
    whole = int(resident[read].sum()) + int(transient[read].max(initial=0))
    return MinimumLimit(best.bytes, best.step, best.shards, max(whole, best.bytes))


def check_limit(limit: int, minimum: MinimumLimit, *, other_bytes: int = 0,
                where: str = "the cache") -> None:
    """Raise CacheLimitError when `limit` cannot hold the plan: the message gives the minimum
    and the limit under which each shard the plan reads is downloaded once.

    Args:
        limit: the cache_limit in bytes.
        minimum: the plan's `minimum_limit` (without other files).
        other_bytes: bytes of the other files the cache folders hold.
        where: the cache folders, for the message.
    """
    need = minimum.plus(other_bytes)
    if limit >= need.bytes:
        return
    raise CacheLimitError(
        f"Minimum cache usage ({need.bytes} bytes) is larger than the cache limit ({limit} "
        f"bytes). Cache limit ({limit} bytes, {_human(limit)}) is too low for this node's "
        f"plan: it needs at least {need.bytes} bytes ({_human(need.bytes)}): "
        f"{minimum.bytes} for the {len(minimum.shards)} shard(s) its readers use at once at "
        f"step {minimum.step} (shards {list(minimum.shards)[:8]}), including one being "
        f"decompressed, plus {other_bytes} bytes of other files already in {where}. "
        f"cache_limit={need.whole} ({_human(need.whole)}) holds every shard this node's "
        "epoch reads, so each is downloaded once (`streaming plan --cache-limit` predicts the "
        "downloads of any limit in between)")


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"
