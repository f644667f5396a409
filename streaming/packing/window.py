"""`window_XX`: sort lengths inside consecutive windows of XX samples and pack each window with
first-fit decreasing. Windows are independent: nothing carries over from one window to the next.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streaming.packing.packer import BufferedPacker, split_packs


def first_fit_decreasing(lengths: np.ndarray, capacity: int) -> np.ndarray:
    """Pack every row of `lengths` [windows, size] with first-fit decreasing, all rows at once.

    Returns the pack number (0, 1, ... in opening order) of every item, same shape as `lengths`.
    Items go in decreasing length (ties: earlier position first) into the lowest-numbered pack
    with room. Unopened packs hold `capacity`, so "first pack with room" also opens new packs.
    """
    rows, size = lengths.shape
    order = np.argsort(-lengths, axis=1, kind="stable")
    sorted_lengths = np.take_along_axis(lengths, order, axis=1)
    remaining = np.full((rows, 1), capacity, dtype=np.int64)
    pack_sorted = np.empty((rows, size), dtype=np.int64)
    row_index = np.arange(rows)
    for rank in range(size):
        item = sorted_lengths[:, rank]
        pack = np.argmax(remaining >= item[:, None], axis=1)
        remaining[row_index, pack] -= item
        pack_sorted[:, rank] = pack
        if remaining[:, -1].min() < capacity:  # some row opened the last column: grow
            remaining = np.hstack([remaining, np.full((rows, 1), capacity, np.int64)])
    packs = np.empty_like(pack_sorted)
    np.put_along_axis(packs, order, pack_sorted, axis=1)
    return packs


class WindowPacker(BufferedPacker):
    """Collect `window` samples, then emit that window's first-fit-decreasing packs.

    Args:
        packing_length: Tokens per pack (the capacity).
        window: Samples packed together (the strategy name "window_100" sets 100).
        **options: `filter_overlong` and `overlong`, as `Packer` takes them.
    """

    name = "window"

    def __init__(self, packing_length: int, window: int = 100, **options: Any) -> None:
        super().__init__(packing_length, window, "window size", **options)
        self.window = self._group

    def _pack_groups(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        return self._pack(ids, lengths, self.window)

    def _pack_rest(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        return self._pack(ids, lengths, ids.size)

    def _pack(self, ids: np.ndarray, lengths: np.ndarray, width: int) -> list[np.ndarray]:
        if ids.size == 0:
            return []
        packs = first_fit_decreasing(lengths.reshape(-1, width), self.packing_length)
        # pack key: window-major, then opening order; split_packs keeps positions inside a pack
        keys = np.arange(packs.shape[0])[:, None] * width + packs
        return split_packs(ids, keys.reshape(-1))

    def _config(self) -> dict[str, Any]:
        return {"window": self.window}
