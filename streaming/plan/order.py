"""An epoch's global order: canonical node sequences interleaved round-robin.

Position p of the global order is sample p // C of canonical node c = p % C. Canonical nodes
whose sequence is shorter than the longest one are padded with their own last samples (the
batching method decides whether padding is served or skipped), so a position's owner is
arithmetic and any node can compute just the positions it serves.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from streaming.plan.config import PlanConfig
from streaming.plan.layout import Layout, build_layout
from streaming.plan.sampling import (
    canonical_extras,
    canonical_picks,
    draw_key,
    piece_extras,
    stream_sizes_by_canonical,
)
from streaming.plan.shuffle.pieces import index_dtype

_SHARD_ORDER_TAG, _SHUFFLE_TAG, _NAIVE_TAG = 0x0D01, 0x0D02, 0x0D03


class EpochOrder:
    """Lazily materialised canonical sequences of one epoch (only those asked for)."""

    def __init__(self, cfg: PlanConfig, num_canonical: int, epoch: int) -> None:
        self.cfg, self.num_canonical, self.epoch = cfg, num_canonical, epoch
        sizes = cfg.samples_per_stream
        targets = cfg.samples_per_stream_epoch
        safe = np.maximum(sizes, 1)
        self.copies = targets // safe
        remainders = targets - self.copies * sizes
        shard_order = None
        if cfg.shard_aware:
            rng = np.random.default_rng([cfg.shuffle_seed, _SHARD_ORDER_TAG])
            shard_order = rng.permutation(len(cfg.samples_per_shard))
        self.layout: Layout = build_layout(
            cfg.samples_per_shard, cfg.shards_per_stream, targets / safe, num_canonical,
            shard_order,
        )
        self.key = draw_key(cfg.sampling_method, epoch)
        sizes_cs = stream_sizes_by_canonical(self.layout, cfg.num_streams)
        self.extras_cs = canonical_extras(sizes_cs, remainders, cfg.shuffle_seed, self.key)
        # int64 [C, S]: picks of each stream in each canonical node this epoch.
        self.stream_counts = sizes_cs * self.copies + self.extras_cs
        lengths = self.stream_counts.sum(axis=1)
        self.total = int(lengths.sum())
        if cfg.shuffle and not cfg.shard_aware:
            lengths = (self.total - np.arange(num_canonical) + num_canonical - 1) // num_canonical
        self.lengths = lengths.astype(np.int64)
        self.span = int(self.lengths.max()) * num_canonical
        # Padding of an empty canonical node borrows from the next non-empty one.
        nonempty = np.flatnonzero(self.lengths > 0)
        nxt = np.searchsorted(nonempty, np.arange(num_canonical)) % len(nonempty)
        self.source = np.where(self.lengths > 0, np.arange(num_canonical), nonempty[nxt])
        self._cache: dict[int, np.ndarray] = {}
        self._naive: np.ndarray | None = None
        self._warn_small(cfg, num_canonical)

    def _warn_small(self, cfg: PlanConfig, num_canonical: int) -> None:
        """The reference's warnings for an epoch smaller than its canonical nodes and for a py1e
        block smaller than a shard (then a shard mixes only with its neighbours)."""
        if self.total < num_canonical:
            warnings.warn(
                f"Trying to partition {self.total} samples over {num_canonical} canonical "
                f"nodes: the epoch has {self.total} samples for {num_canonical} canonical nodes: "
                "several ranks then repeat samples to fill their batches; check the dataset "
                "size or lower num_canonical_nodes", stacklevel=4)
        algo = cfg.shuffle_algorithm
        if algo is not None and algo.centred_windows and len(cfg.samples_per_shard):
            block = cfg.block_size(num_canonical)
            largest = int(np.ceil(cfg.epoch_samples_per_shard.max()))  # its picks this epoch
            if block < largest:
                warnings.warn(
                    "Shuffle block size was smaller than shard size for some shards: "
                    f"shuffle_block_size={block} is smaller than the largest shard ({largest} "
                    f"samples in this epoch): {algo.name} spreads such a shard only over its "
                    "own length, so "
                    "it mixes with its neighbours only; a block of at least one shard mixes "
                    "better",
                    stacklevel=4)

    def picks(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Canonical node c's picked ids in storage/piece order, and piece bounds."""
        extras = piece_extras(self.layout, c, self.extras_cs[c], self.cfg.shuffle_seed, self.key)
        return canonical_picks(self.layout, c, self.cfg.shard_offsets, self.copies, extras,
                               self.cfg.sampling_granularity, self.cfg.shuffle_seed, self.key)

    def sequence(self, c: int) -> np.ndarray:
        """Canonical node c's ids in this epoch's order."""
        if c in self._cache:
            return self._cache[c]
        cfg = self.cfg
        if cfg.shuffle and not cfg.shard_aware:
            seq = self._naive_order()[c::self.num_canonical]
        else:
            if cfg.shuffle:
                rng = np.random.default_rng([cfg.shuffle_seed, self.epoch, c, _SHUFFLE_TAG])
                # No local reference to the picks: the shuffle may free them as it goes.
                seq = cfg.shuffle_algorithm.shuffle(
                    *self.picks(c), rng, cfg.block_size(self.num_canonical))
            else:  # storage order; a repeated piece is read in whole passes ([0, 1, 0, 1])
                seq = self.picks(c)[0]
        self._cache[c] = seq
        return seq

    def _naive_order(self) -> np.ndarray:
        if self._naive is None:
            ids = np.concatenate([self.picks(c)[0] for c in range(self.num_canonical)])
            rng = np.random.default_rng([self.cfg.shuffle_seed, self.epoch, _NAIVE_TAG])
            self._naive = self.cfg.shuffle_algorithm.shuffle(ids, np.array([0, len(ids)]), rng, 1)
        return self._naive

    def take(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids at global `positions` (int64 array) and whether each one is padding."""
        num = self.num_canonical
        canon = positions % num
        index = positions // num
        pad = index >= self.lengths[canon]
        out = np.empty(len(positions), dtype=index_dtype(int(self.cfg.shard_offsets[-1])))
        small = canon.astype(np.int16 if num < 2**15 else np.int64)
        order = np.argsort(small, kind="stable")
        counts = np.bincount(canon, minlength=num)
        bounds = np.concatenate(([0], np.cumsum(counts)))
        for c in np.flatnonzero(counts).tolist():
            where = order[bounds[c]:bounds[c + 1]]
            src = int(self.source[c])
            seq = self.sequence(src)
            out[where] = seq[_wrap(index[where], len(seq))]
        return out, pad

    def take_progression(self, first: int, step: int, count: int) -> np.ndarray:
        """Ids at positions first + step * j, j < count, by strided slices (no index arrays).

        Positions of one canonical node form an arithmetic progression in j, so each is a
        strided copy of a slice of its sequence; only padding beyond the end needs a modulo.
        """
        num = self.num_canonical
        out = None
        period = num // math.gcd(num, step)
        stride = step * period // num
        if period == 1:  # one canonical node, every stride-th sample: a view, no copy
            seq = self.sequence(int(self.source[first % num]))
            start = first // num
            if start + stride * (count - 1) < len(seq):
                return seq[start:start + stride * count:stride]
        for t in range(min(period, count)):
            p = first + t * step
            seq = self.sequence(int(self.source[p % num]))
            if out is None:
                out = np.empty(count, dtype=seq.dtype)
            start, n = p // num, len(range(t, count, period))
            inside = max(min(n, -(-(len(seq) - start) // stride)), 0)
            dest = out[t::period]
            dest[:inside] = seq[start:start + stride * inside:stride]
            if inside < n:
                wrap = start + stride * np.arange(inside, n, dtype=np.int64)
                dest[inside:] = seq[_wrap(wrap, len(seq))]
        return np.empty(0, dtype=np.int64) if out is None else out


def _wrap(index: np.ndarray, length: int) -> np.ndarray:
    """Index into a sequence of `length` for positions past its end: the last sample first,
    then backwards (a short canonical node repeats its own last samples)."""
    beyond = np.maximum(index - length, 0)
    return np.where(index < length, index, length - 1 - beyond % length)
