"""Pure planning over a whole array of lengths: the packs a streaming packer would emit, and the
precomputed per-epoch plan (shuffled, count known before iteration)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streaming.errors import PlanError
from streaming.packing.best_fit import BestFitPacker
from streaming.packing.packer import as_int64
from streaming.packing.strategies import OFFLINE, make_packer


def pack_lengths(
    lengths: np.ndarray,
    packing_length: int,
    strategy: str = "best_fit",
    filter_overlong: bool = True,
    buffer_size: int | None = None,
    overlong: str = "split",
) -> list[np.ndarray]:
    """Pack `lengths` in order; return int64 index arrays (one per pack) in emission order.

    For streaming strategies this is exactly what the streaming packer emits when fed the same
    lengths in the same order (ids = positions). `offline_bfd` packs the whole input at once.

    Args:
        lengths: Tokens of each sample (non-negative ints, 1-D).
        packing_length: Tokens per pack (the capacity).
        strategy: "best_fit" (default), "first_fit", "window_XX" or "offline_bfd".
        filter_overlong: Drop samples longer than `packing_length`.
        buffer_size: best_fit's lookahead in samples; None: 1000. Other strategies ignore it.
        overlong: Without filtering: "split" cuts a long sample into `packing_length` pieces,
            "alone" makes it a pack of its own.
    """
    lengths = as_int64(lengths, "lengths")
    ids = np.arange(lengths.size, dtype=np.int64)
    options = {"filter_overlong": filter_overlong, "overlong": overlong}
    if strategy == OFFLINE:
        packer = BestFitPacker(packing_length, buffer_size=max(1, lengths.size + 1), **options)
    else:
        packer = make_packer(strategy, packing_length, buffer_size=buffer_size, **options)
    return packer.push_many(ids, lengths) + packer.flush()


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator of one epoch's precomputed plan: a pure function of (seed, epoch)."""
    if seed < 0 or epoch < 0:
        raise PlanError(f"seed and epoch must be >= 0, got seed={seed}, epoch={epoch}")
    return np.random.Generator(np.random.PCG64([int(seed), int(epoch), 0x5041434B]))


def plan_packs(
    lengths: np.ndarray,
    packing_length: int,
    strategy: str = "best_fit",
    seed: int = 0,
    epoch: int = 0,
    shuffle: bool = True,
    *,
    filter_overlong: bool = True,
    buffer_size: int | None = None,
    overlong: str = "split",
) -> list[np.ndarray]:
    """Packs of sample indices for one epoch, known before iteration starts.

    With `shuffle`, samples are permuted before packing and the packs are permuted after (so the
    size-sorted order that best-fit produces does not leak into training); both draws come from
    (seed, epoch) only. A split sample's pieces are kept in token order either way.

    Args:
        lengths: Tokens of each sample (non-negative ints, 1-D).
        packing_length: Tokens per pack (the capacity).
        strategy: "best_fit" (default), "first_fit", "window_XX" or "offline_bfd".
        seed: Seed of the shuffles (with `epoch`); at least 0.
        epoch: The epoch planned; at least 0.
        shuffle: Permute the samples before packing and the packs after; False keeps order.
        filter_overlong: Drop samples longer than `packing_length`.
        buffer_size: best_fit's lookahead in samples; None: 1000. Other strategies ignore it.
        overlong: Without filtering: "split" cuts a long sample into `packing_length` pieces,
            "alone" makes it a pack of its own.
    """
    lengths = as_int64(lengths, "lengths")
    if not shuffle:
        return pack_lengths(lengths, packing_length, strategy, filter_overlong, buffer_size,
                            overlong)
    rng = epoch_rng(seed, epoch)
    perm = rng.permutation(lengths.size).astype(np.int64)
    packs = pack_lengths(lengths[perm], packing_length, strategy, filter_overlong, buffer_size,
                         overlong)
    packs = [perm[p] for p in packs]
    order = rng.permutation(len(packs))
    if not filter_overlong and overlong == "split":
        order = _keep_piece_order(packs, order)
    return [packs[i] for i in order.tolist()]


def _keep_piece_order(packs: list[np.ndarray], order: np.ndarray) -> np.ndarray:
    """Reorder so that packs sharing a (split) sample keep their relative emission order."""
    sizes = np.fromiter((p.size for p in packs), np.int64, len(packs))
    flat = np.concatenate(packs) if packs else np.empty(0, np.int64)
    owner = np.repeat(np.arange(len(packs)), sizes)
    _, first, counts = np.unique(flat, return_index=True, return_counts=True)
    if counts.max(initial=1) <= 1:
        return order
    # packs holding a repeated id: assign them, in emission order, the shuffled slots they got
    repeated = np.isin(flat, flat[first[counts > 1]])
    involved = np.unique(owner[repeated])
    position = np.empty(len(packs), np.int64)
    position[order] = np.arange(len(packs))
    slots = np.sort(position[involved])
    position[involved] = slots
    return np.argsort(position, kind="stable")


@dataclass(frozen=True)
class EpochPacks:
    """One epoch's packs as flat arrays: pack k holds `ids[starts[k]:starts[k+1]]`, and
    `pieces` says which `packing_length` slice of a split sample each entry is (0 otherwise)."""

    ids: np.ndarray
    pieces: np.ndarray
    starts: np.ndarray

    @classmethod
    def from_packs(cls, packs: list[np.ndarray]) -> EpochPacks:
        """Flatten packs given in emission order (which numbers the pieces of split samples)."""
        sizes = np.fromiter((p.size for p in packs), np.int64, len(packs))
        starts = np.zeros(len(packs) + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        flat = np.concatenate(packs).astype(np.int64) if packs else np.zeros(0, np.int64)
        return cls(flat, _pieces(flat), starts)

    @property
    def num_packs(self) -> int:
        return len(self.starts) - 1

    def pack(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(sample ids, piece numbers) of pack `k`."""
        lo, hi = int(self.starts[k]), int(self.starts[k + 1])
        return self.ids[lo:hi], self.pieces[lo:hi]

    def select(self, packs: np.ndarray) -> EpochPacks:
        """The sub-plan holding `packs` (pack numbers) in that order."""
        sizes = np.diff(self.starts)[packs]
        starts = np.zeros(len(packs) + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        take = np.repeat(self.starts[packs] - starts[:-1], sizes) + np.arange(starts[-1])
        return EpochPacks(self.ids[take], self.pieces[take], starts)

    def tokens(self, lengths: np.ndarray, packing_length: int, split: bool) -> np.ndarray:
        """Real tokens in each pack."""
        size = lengths[self.ids] if len(self.ids) else np.zeros(0, np.int64)
        if split:
            size = np.clip(size - self.pieces * packing_length, 0, packing_length)
        per_pack = np.zeros(self.num_packs, np.int64)
        owner = np.repeat(np.arange(self.num_packs), np.diff(self.starts))
        np.add.at(per_pack, owner, size)
        return per_pack


def balance(packs: list[np.ndarray], ranks: int) -> list[np.ndarray]:
    """Make the pack count a multiple of `ranks` without dropping or repeating a sample."""
    return grow(packs, len(packs) + (-len(packs) % ranks))


def grow(packs: list[np.ndarray], target: int) -> list[np.ndarray]:
    """Reach `target` packs by splitting the packs holding the most samples in two (halves stay
    adjacent, so split-sample pieces keep their order); when too few packs hold two samples,
    add empty packs."""
    missing = target - len(packs)
    if missing <= 0:
        return packs
    counts = np.fromiter((p.size for p in packs), np.int64, len(packs))
    order = np.argsort(-counts, kind="stable")
    chosen = set(order[:missing][counts[order[:missing]] >= 2].tolist())
    out: list[np.ndarray] = []
    for k, pack in enumerate(packs):
        if k in chosen:
            half = pack.size // 2
            out += [pack[:half], pack[half:]]
        else:
            out.append(pack)
    out += [np.zeros(0, np.int64)] * (missing - len(chosen))
    return out


def _pieces(flat: np.ndarray) -> np.ndarray:
    """Occurrence number of each id in `flat` (0 for the first time an id appears)."""
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]] if len(flat) else np.zeros(0, bool)
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(flat)), 0))
    out = np.empty(len(flat), np.int64)
    out[order] = np.arange(len(flat)) - group_start
    return out


def epoch_packs(
    lengths: np.ndarray,
    packing_length: int,
    strategy: str = "best_fit",
    *,
    seed: int = 0,
    epoch: int = 0,
    shuffle: bool = True,
    ranks: int = 1,
    filter_overlong: bool = True,
    overlong: str = "split",
    buffer_size: int | None = None,
) -> EpochPacks:
    """The epoch's packs over every rank (count a multiple of `ranks`); rank r serves packs
    r, r + ranks, ... A pure function of its arguments."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise PlanError(f"ranks must be a positive int, got {ranks!r}")
    packs = plan_packs(lengths, packing_length, strategy, seed, epoch, shuffle,
                       filter_overlong=filter_overlong, buffer_size=buffer_size, overlong=overlong)
    return EpochPacks.from_packs(balance(packs, ranks))


def rank_packs(plan: EpochPacks, rank: int, ranks: int) -> EpochPacks:
    """Rank `rank`'s share of an epoch plan (every rank gets the same number of packs)."""
    if not 0 <= rank < ranks:
        raise PlanError(f"rank {rank} is outside [0, {ranks})")
    return plan.select(np.arange(rank, plan.num_packs, ranks))
