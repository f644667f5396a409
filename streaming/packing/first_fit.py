"""`first_fit`: the training engines' greedy packer, one open pack closed when the next sample
does not fit. Cheapest and order-preserving, but wastes the tail of most packs."""

from __future__ import annotations

from typing import Any

import numpy as np

from streaming.packing.base import Packer, load_pairs, pairs_state


class FirstFitPacker(Packer):
    """Walk samples in order with ONE open pack; close it when the next sample does not fit."""

    name = "first_fit"

    def __init__(self, packing_length: int, **options: Any) -> None:
        super().__init__(packing_length, **options)
        self._ids = np.empty(0, np.int64)
        self._lengths = np.empty(0, np.int64)

    def _push_many(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        cap = self.packing_length
        used = int(self._lengths.sum())
        cuts = []
        for pos, length in enumerate(lengths.tolist()):
            used += length
            if used > cap:
                cuts.append(pos)
                used = length
        all_ids = np.concatenate([self._ids, ids])
        all_lengths = np.concatenate([self._lengths, lengths])
        offset = self._ids.size
        pieces = np.split(all_ids, [c + offset for c in cuts])
        tail_start = cuts[-1] + offset if cuts else 0
        self._ids = pieces.pop()
        self._lengths = all_lengths[tail_start:]
        return pieces

    def flush(self) -> list[np.ndarray]:
        out = [self._ids] if self._ids.size else []
        self._ids = np.empty(0, np.int64)
        self._lengths = np.empty(0, np.int64)
        return out

    def _state(self) -> dict[str, Any]:
        return pairs_state(self._ids, self._lengths)

    def _load(self, state: dict[str, Any]) -> None:
        self._ids, self._lengths = load_pairs(state)
