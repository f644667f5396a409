"""Cache counters as users see them: a small frozen dataclass built from shared int64 counters."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

# Column order of the per-reader counter rows in the shared table.
COUNTERS = ("hits", "misses", "downloads", "bytes_downloaded", "evictions", "wait_ns",
            "needed_evictions")


@dataclass(frozen=True)
class CacheStats:
    """What the cache did so far (node-wide, or for one reader).

    hits: shard requests a reader found ready; misses: requests that had to wait.
    downloads / bytes_downloaded: shards fetched and the bytes that came over the network.
    evictions: shards removed to stay under cache_limit.
    needed_evictions: those of them a running reader was still going to read (each is
        downloaded again); many of these say the limit holds less than the readers use at once.
    wait_seconds: time readers spent blocked waiting for data (what a user's step loses).
    """

    hits: int = 0
    misses: int = 0
    downloads: int = 0
    bytes_downloaded: int = 0
    evictions: int = 0
    wait_seconds: float = 0.0
    needed_evictions: int = 0

    @classmethod
    def from_counters(cls, rows: np.ndarray) -> CacheStats:
        """Sum counter rows [readers, len(COUNTERS)] (or one row) into one record."""
        total = np.asarray(rows, np.int64).reshape(-1, len(COUNTERS)).sum(axis=0)
        values = dict(zip(COUNTERS, (int(v) for v in total)))
        wait = values.pop("wait_ns") / 1e9
        return cls(**values, wait_seconds=wait)

    @property
    def hit_rate(self) -> float:
        """Fraction of shard requests served without waiting (1.0 before any request)."""
        asked = self.hits + self.misses
        return self.hits / asked if asked else 1.0

    def as_dict(self) -> dict[str, float]:
        """Plain dict, e.g. for a metrics logger."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __str__(self) -> str:
        return (f"cache: {self.hits} hits, {self.misses} misses ({self.hit_rate:.1%} hit rate), "
                f"{self.downloads} downloads ({self.bytes_downloaded / 2**20:.1f} MiB), "
                f"{self.evictions} evictions ({self.needed_evictions} still needed), "
                f"{self.wait_seconds:.3f} s waiting")
