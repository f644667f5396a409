"""Which samples of each piece an epoch uses: whole copies plus a seeded subset.

Counts are decided top-down so each level stays cheap and only the caller's canonical nodes are
ever materialised: stream targets -> per canonical node (exact shares, deterministic) ->
per piece (multivariate hypergeometric) -> rows (seeded runs of `sampling_granularity`).
`balanced` reseeds the subsets with the epoch; `fixed` draws the same subsets every epoch.
"""

from __future__ import annotations

import numpy as np

from streaming.plan.layout import Layout
from streaming.plan.shuffle.pieces import expand_runs, index_dtype

_CANON_TAG, _PIECE_TAG, _ROW_TAG = 0x5C41, 0x5C42, 0x5C43


def draw_key(sampling_method: str, epoch: int) -> int:
    """Entropy word that makes subsets vary by epoch (balanced) or not (fixed)."""
    return 0 if sampling_method == "fixed" else epoch + 1


def stream_sizes_by_canonical(layout: Layout, num_streams: int) -> np.ndarray:
    """int64 [C, S]: stored samples of each stream inside each canonical node."""
    canon = np.repeat(np.arange(layout.num_canonical), np.diff(layout.starts))
    flat = canon * num_streams + layout.stream
    counts = np.bincount(flat, weights=layout.hi - layout.lo, minlength=layout.num_canonical *
                         num_streams)
    return counts.astype(np.int64).reshape(layout.num_canonical, num_streams)


def canonical_extras(
    sizes_cs: np.ndarray, remainders: np.ndarray, seed: int, key: int
) -> np.ndarray:
    """int64 [C, S]: each stream's leftover picks split over canonical nodes by exact share.

    Floor of the proportional share, then the few leftovers go to the largest fractional parts
    (ties broken by a seeded draw), so every canonical node's length is known without sampling.
    """
    totals = sizes_cs.sum(axis=0)
    out = np.zeros_like(sizes_cs)
    rng = np.random.default_rng([seed, key, _CANON_TAG])
    for s in np.flatnonzero(remainders):
        exact = sizes_cs[:, s] * (int(remainders[s]) / int(totals[s]))
        base = np.minimum(np.floor(exact).astype(np.int64), sizes_cs[:, s])
        left = int(remainders[s] - base.sum())
        if left:
            frac = exact - base
            frac[base >= sizes_cs[:, s]] = -1.0
            rank = np.lexsort((rng.random(len(frac)), -frac))
            base[rank[:left]] += 1
        out[:, s] = base
    return out


def piece_extras(
    layout: Layout, c: int, extras_s: np.ndarray, seed: int, key: int
) -> np.ndarray:
    """int64 [pieces of c]: canonical node c's leftover picks spread over its pieces."""
    sl = layout.pieces_of(c)
    streams = layout.stream[sl]
    sizes = layout.hi[sl] - layout.lo[sl]
    out = np.zeros(len(sizes), dtype=np.int64)
    rng = np.random.default_rng([seed, key, c, _PIECE_TAG])
    for s in np.flatnonzero(extras_s):
        mask = np.flatnonzero(streams == s)
        out[mask] = rng.multivariate_hypergeometric(sizes[mask], int(extras_s[s]),
                                                    method="marginals")
    return out


def subset_rows(n: int, k: int, granularity: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct rows of [0, n) drawn as seeded runs of `granularity` consecutive rows."""
    if k >= n:
        return np.arange(n, dtype=np.int64)
    if granularity <= 1:
        return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)
    num_runs = -(-n // granularity)
    runs = rng.permutation(num_runs)
    lengths = np.minimum(granularity, n - runs * granularity)
    taken = np.searchsorted(np.cumsum(lengths), k, side="left") + 1
    runs, lengths = runs[:taken], lengths[:taken].copy()
    lengths[-1] -= int(lengths.sum()) - k
    starts = np.repeat(runs * granularity - np.cumsum(lengths) + lengths, lengths)
    return np.sort(starts + np.arange(k, dtype=np.int64))


def canonical_picks(
    layout: Layout,
    c: int,
    shard_offsets: np.ndarray,
    copies: np.ndarray,
    extras: np.ndarray,
    granularity: int,
    seed: int,
    key: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Global sample ids picked from canonical node c, grouped by piece, and piece bounds.

    Ids use the narrowest integer type that holds every id of the dataset (int32 below 2**31).
    """
    sl = layout.pieces_of(c)
    lo, hi, stream = layout.lo[sl], layout.hi[sl], layout.stream[sl]
    base = shard_offsets[layout.shard[sl]] + lo
    n = hi - lo
    cp = copies[stream]
    lengths = n * cp + extras
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    total = int(bounds[-1])
    dtype = index_dtype(int(shard_offsets[-1]))
    if not np.any(extras) and np.all(cp <= 1):
        return expand_runs(base, lengths).astype(dtype, copy=False), bounds
    ids = np.empty(total, dtype=dtype)
    rng = np.random.default_rng([seed, key, c, _ROW_TAG])
    for p in range(len(n)):
        start = int(bounds[p])
        whole = int(n[p] * cp[p])
        if whole:
            ids[start:start + whole] = np.tile(np.arange(base[p], base[p] + n[p]), int(cp[p]))
        if extras[p]:
            rows = subset_rows(int(n[p]), int(extras[p]), granularity, rng)
            ids[start + whole:int(bounds[p + 1])] = base[p] + rows
    return ids, bounds
