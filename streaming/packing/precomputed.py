"""Precomputed (map-style) packing: each epoch's packs are planned from the dataset's lengths
before iteration, so the number of packs per rank (the step count) is known up front.

The plan is `pack_planner.EpochPacks` (numpy only); `PackedDataset` serves its packs as collated
tensors from any randomly indexable dataset (LocalDataset, StreamingDataset).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from streaming.errors import PlanError
from streaming.packing.kept_columns import KeptValues, check_keep_columns
from streaming.packing.pack_planner import epoch_packs, rank_packs
from streaming.packing.pack_stats import PackStats, pack_stats


def _default_ranks() -> tuple[int, int]:
    from streaming.coord.world_detect import detect_world

    world = detect_world(workers_per_rank=1)
    return world.data_parallel_rank, world.data_parallel_ranks


class PackedDataset:
    """Map-style packs over a randomly indexable dataset, planned per epoch from its lengths.

    `len(ds)` is this rank's number of packs for the epoch (equal on every rank); `ds[k]` is
    pack k collated by `collator` (a PackCollator) plus `sample_ids`; `set_epoch(e)` replans.
    Over all ranks, every sample (not filtered as overlong) appears exactly once per epoch.

    Args:
        source: A dataset folder (opened as a LocalDataset), or a dataset indexable by
            sample id (LocalDataset, StreamingDataset).
        column: The token column whose lengths are packed.
        packing_length: Tokens per pack (the capacity; default 32000).
        packing_strategy: "best_fit" (default), "first_fit", "window_XX" or "offline_bfd"
            (best-fit decreasing over the whole epoch: the fullest packs).
        filter_overlong: Drop samples longer than `packing_length`.
        overlong: Without filtering: "split" cuts a long sample into `packing_length` pieces,
            "alone" makes it a pack of its own.
        buffer_size: best_fit's lookahead in samples; None: 1000.
        seed: Seed of the per-epoch shuffles (with the epoch).
        shuffle: Shuffle samples before packing and packs after; False keeps order.
        rank: This data-parallel rank; None: detected (torchrun, process group, ...).
        num_ranks: Data-parallel ranks; None: detected.
        lengths: Each sample's tokens, if already known; None: `load_lengths(source, column)`.
        collator: Turns packs into tensors; None: `PackCollator(packing_length)`.
        keep_columns: Columns of the samples carried into each pack (and `batch`) beside
            `sample_ids`: one value per entry of `sample_ids`, a tensor for numbers, else a
            list. None: none.
    """

    def __init__(
        self,
        source: Any,
        column: str = "tokens",
        packing_length: int = 32000,
        packing_strategy: str = "best_fit",
        *,
        filter_overlong: bool = True,
        overlong: str = "split",
        buffer_size: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        rank: int | None = None,
        num_ranks: int | None = None,
        lengths: np.ndarray | None = None,
        collator: Any = None,
        keep_columns: str | Sequence[str] | None = None,
    ) -> None:
        from streaming.dataset.lengths import load_lengths
        from streaming.packing.collate import PackCollator

        if isinstance(source, (str, os.PathLike)):
            from streaming.dataset.local_dataset import LocalDataset

            source = LocalDataset(source)
        self.source = source
        self.column = column
        self.packing_length = int(packing_length)
        self.lengths = (load_lengths(source, column) if lengths is None
                        else np.asarray(lengths, np.int64))
        if rank is None or num_ranks is None:
            env_rank, env_ranks = _default_ranks()
            rank = env_rank if rank is None else rank
            num_ranks = env_ranks if num_ranks is None else num_ranks
        self.rank, self.num_ranks = int(rank), int(num_ranks)
        self._options = {"strategy": packing_strategy, "filter_overlong": filter_overlong,
                         "overlong": overlong, "buffer_size": buffer_size, "seed": seed,
                         "shuffle": shuffle, "ranks": self.num_ranks}
        self._split = not filter_overlong and overlong == "split"
        self.collator = collator or PackCollator(self.packing_length)
        self.keep_columns = check_keep_columns(keep_columns)
        self.epoch = -1
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        """Plan epoch `epoch` (call before each epoch, like DistributedSampler.set_epoch)."""
        if epoch != self.epoch:
            plan = epoch_packs(self.lengths, self.packing_length, epoch=epoch, **self._options)
            self.plan = rank_packs(plan, self.rank, self.num_ranks)
            self.epoch = epoch

    def __len__(self) -> int:
        return self.plan.num_packs

    def sequences(self, k: int, kept: KeptValues | None = None
                  ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Sample ids and token arrays of this rank's pack `k` (split samples sliced); the
        samples' `keep_columns` values are added to `kept` when given."""
        if not -len(self) <= k < len(self):
            raise IndexError(f"pack {k} out of range for {len(self)} packs")
        ids, pieces = self.plan.pack(k % len(self))
        if ids.size == 0:
            return ids, []
        samples = self.source[ids]
        cap = self.packing_length
        out = []
        for sample, piece, sample_id in zip(samples, pieces.tolist(), ids.tolist()):
            if self.column not in sample:
                raise PlanError(f"sample {sample_id} has no column {self.column!r} to pack")
            if kept is not None:
                kept.add(sample_id, sample)
            tokens = np.asarray(sample[self.column]).reshape(-1)
            if self._split and tokens.size > cap:
                tokens = tokens[piece * cap:(piece + 1) * cap]
            out.append(tokens)
        return ids, out

    def __getitem__(self, k: int) -> dict[str, Any]:
        import torch

        kept = KeptValues(self.keep_columns)
        ids, sequences = self.sequences(int(k), kept)
        out = self.collator.pack(sequences)
        out["sample_ids"] = torch.from_numpy(ids.copy())
        out.update(kept.collated())
        return out

    def batch(self, ks: Sequence[int]) -> dict[str, Any]:
        """Several packs collated into [B, W] tensors (PackCollator.batch), with their
        `keep_columns` (one value per sample, in pack order)."""
        kept = KeptValues(self.keep_columns)
        out = self.collator.batch([self.sequences(int(k), kept)[1] for k in ks])
        out.update(kept.collated())
        return out

    def stats(self) -> PackStats:
        """Fill statistics of this rank's packs for the current epoch."""
        tokens = self.plan.tokens(self.lengths, self.packing_length, self._split)
        return pack_stats(tokens, self.packing_length, len(self.plan.ids))
