"""`first_fit`: the training engines' greedy packer, one open pack closed when the next sample
does not fit. Cheapest and order-preserving, but wastes the tail of most packs."""

from __future__ import annotations

from typing import Any

import numpy as np

from streaming.errors import StateMismatchError
from streaming.packing.packer import Packer, load_pairs, pairs_state


class FirstFitPacker(Packer):
    """Walk samples in order with ONE open pack; close it when the next sample does not fit.

    Args:
        packing_length: Tokens per pack (the capacity).
        **options: `filter_overlong` and `overlong`, as `Packer` takes them.
    """

    name = "first_fit"

    def __init__(self, packing_length: int, **options: Any) -> None:
        super().__init__(packing_length, **options)
        self._ids: list[int] = []  # the open pack
        self._lengths: list[int] = []
        self._used = 0

    def _push_one(self, sample_id: int, length: int) -> list[np.ndarray]:
        if self._used + length > self.packing_length:
            out = [np.array(self._ids, dtype=np.int64)]
            self._ids, self._lengths, self._used = [sample_id], [length], length
            return out
        self._ids.append(sample_id)
        self._lengths.append(length)
        self._used += length
        return []

    def _push_many(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        cap = self.packing_length
        used = self._used
        cuts = []
        for pos, length in enumerate(lengths.tolist()):
            used += length
            if used > cap:
                cuts.append(pos)
                used = length
        offset = len(self._ids)
        all_ids = np.concatenate([np.array(self._ids, dtype=np.int64), ids])
        pieces = np.split(all_ids, [c + offset for c in cuts])
        self._ids = pieces.pop().tolist()
        self._lengths = lengths[cuts[-1] :].tolist() if cuts else self._lengths + lengths.tolist()
        self._used = used
        return pieces

    def flush(self) -> list[np.ndarray]:
        out = [np.array(self._ids, dtype=np.int64)] if self._ids else []
        self._ids, self._lengths, self._used = [], [], 0
        return out

    def _state(self) -> dict[str, Any]:
        return pairs_state(self._ids, self._lengths)

    def _load(self, state: dict[str, Any]) -> None:
        ids, lengths = load_pairs(state)
        if lengths.sum() > self.packing_length:
            raise StateMismatchError(
                f"first_fit state: the open pack holds {int(lengths.sum())} tokens, more than "
                f"packing_length {self.packing_length}"
            )
        self._ids, self._lengths, self._used = ids.tolist(), lengths.tolist(), int(lengths.sum())
