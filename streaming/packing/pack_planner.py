"""Pure planning over a whole array of lengths: the packs a streaming packer would emit, and the
precomputed per-epoch plan (shuffled, count known before iteration)."""

from __future__ import annotations

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
