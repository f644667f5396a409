"""`best_fit` (the default): best-fit decreasing over a bounded lookahead buffer, carrying the
least-filled packs over to the next buffer so their holes get filled by later samples."""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import heappop, heappush
from itertools import pairwise
from typing import Any

import numpy as np

from streaming.errors import PlanError, StateMismatchError
from streaming.packing.packer import BufferedPacker, as_int64, split_packs

DEFAULT_BUFFER = 1000
DEFAULT_MAX_AGE = 8


def best_fit_decreasing(
    lengths: np.ndarray, capacity: int, open_remaining: list[int]
) -> tuple[np.ndarray, list[int]]:
    """Place `lengths` (largest first, ties by position) into the open pack with least room left.

    `open_remaining` is the free room of already open packs, numbered 0..k-1; new packs get the
    next numbers. Among packs with equal room the lowest number wins. The tightest pack is found
    in O(log n): a sorted list of the distinct free-room values, each with a heap of pack numbers.
    Returns (pack number of every item, free room of every pack).
    """
    remaining = list(open_remaining)
    rooms: list[int] = []
    heaps: dict[int, list[int]] = {}
    for pack, room in enumerate(remaining):
        if room > 0:
            if room in heaps:
                heaps[room].append(pack)  # packs are visited in increasing order: still a heap
            else:
                heaps[room] = [pack]
                rooms.append(room)
    rooms.sort()
    order = np.argsort(-lengths, kind="stable")
    placed: list[int] = []  # pack of each item in sorted order: sequential, cache-friendly
    put = placed.append
    find, add, take, give, lookup = bisect_left, insort, heappop, heappush, heaps.get
    for size in lengths[order].tolist():
        slot = find(rooms, size)
        if slot == len(rooms):
            pack = len(remaining)
            room = capacity - size
            remaining.append(room)
        else:
            old = rooms[slot]
            heap = heaps[old]
            pack = take(heap)
            if not heap:
                del rooms[slot]
                del heaps[old]
            room = old - size
            remaining[pack] = room
        put(pack)
        if room > 0:
            heap = lookup(room)
            if heap is None:
                heaps[room] = [pack]
                add(rooms, room)
            else:
                give(heap, pack)
    assign = np.empty(lengths.size, dtype=np.int64)
    assign[order] = placed
    return assign, remaining


class BestFitPacker(BufferedPacker):
    """Buffer `buffer_size` samples, best-fit them (decreasing) into open packs, emit full packs.

    After each buffer, the `carry` packs with the most free room stay open for the next buffer;
    every other pack is emitted, in opening order. Full packs, and packs already carried over
    `max_age` buffers, are never kept, so no sample waits more than `max_age` buffers.

    Args:
        packing_length: Tokens per pack (the capacity).
        buffer_size: Samples sorted and placed together; None: 1000.
        carry: Packs kept open between buffers; None: buffer_size // 8 (at least 1).
        max_age: Buffers a pack may stay open (8).
        **options: `filter_overlong` and `overlong`, as `Packer` takes them.
    """

    name = "best_fit"

    def __init__(
        self,
        packing_length: int,
        buffer_size: int | None = None,
        carry: int | None = None,
        max_age: int = DEFAULT_MAX_AGE,
        **options: Any,
    ) -> None:
        buffer_size = DEFAULT_BUFFER if buffer_size is None else buffer_size
        super().__init__(packing_length, buffer_size, "buffer_size", **options)
        self.buffer_size = self._group
        self.carry = max(1, self.buffer_size // 8) if carry is None else int(carry)
        if self.carry < 0:
            raise PlanError(f"carry must be >= 0, got {carry}")
        if max_age < 1:
            raise PlanError(f"max_age must be >= 1, got {max_age}")
        self.max_age = int(max_age)
        self._open_ids = np.empty(0, np.int64)  # ids held by carried packs, by pack then position
        self._pack_of = np.empty(0, np.int64)  # carried pack (0, 1, ... in opening order) of each
        self._room: list[int] = []  # free room of each carried pack
        self._age = np.empty(0, np.int64)  # buffers each carried pack has been carried over

    def _pack_groups(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        size = self.buffer_size
        out: list[np.ndarray] = []
        for start in range(0, ids.size, size):
            out += self._pack(ids[start : start + size], lengths[start : start + size])
        return out

    def _pack_rest(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        return self._pack(ids, lengths, final=True)

    def _pack(self, ids: np.ndarray, lengths: np.ndarray, final: bool = False) -> list[np.ndarray]:
        assign, room_list = best_fit_decreasing(lengths, self.packing_length, self._room)
        room = np.asarray(room_list, dtype=np.int64)
        count = room.size
        kept = np.zeros(count, dtype=bool)
        age = np.concatenate([self._age, np.zeros(count - self._age.size, np.int64)])
        if not final and self.carry:
            # a pack carried over `max_age` buffers is emitted: no sample waits forever
            open_packs = np.flatnonzero((room > 0) & (age < self.max_age))
            by_room = open_packs[np.argsort(-room[open_packs], kind="stable")]
            kept[by_room[: self.carry]] = True
        # relabel: emitted packs 0..e-1 first, kept ones after, each group in opening order
        emitted = count - int(kept.sum())
        label = np.empty(count, dtype=np.int64)
        label[~kept] = np.arange(emitted)
        label[kept] = np.arange(emitted, count)
        keys = label[np.concatenate([self._pack_of, assign])]
        order = np.argsort(keys, kind="stable")  # stable: positions stay in arrival order
        keys = keys[order]
        grouped = np.concatenate([self._open_ids, ids])[order]
        bounds = np.searchsorted(keys, np.arange(emitted + 1)).tolist()
        out = [grouped[a:b] for a, b in pairwise(bounds)]
        rest = bounds[-1]
        self._open_ids = grouped[rest:]
        self._pack_of = keys[rest:] - emitted
        self._room = room[kept].tolist()
        self._age = age[kept] + 1
        return out

    def _config(self) -> dict[str, Any]:
        return {"buffer_size": self.buffer_size, "carry": self.carry, "max_age": self.max_age}

    def _state(self) -> dict[str, Any]:
        return {
            **super()._state(),
            "open_ids": [p.tolist() for p in split_packs(self._open_ids, self._pack_of)],
            "open_room": list(self._room),
            "open_age": self._age.tolist(),
        }

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        open_ids = state.get("open_ids", [])
        room = as_int64(state.get("open_room", []), "open_room").tolist()
        age = as_int64(state.get("open_age", []), "open_age")
        if not len(open_ids) == len(room) == age.size:
            raise StateMismatchError("best_fit state: open_ids, open_room, open_age differ in size")
        if any(r > self.packing_length for r in room):
            raise StateMismatchError("best_fit state: an open pack has more room than capacity")
        packs = [np.asarray(p, dtype=np.int64).reshape(-1) for p in open_ids]
        if any(p.size == 0 for p in packs):
            raise StateMismatchError("best_fit state: an open pack is empty")
        self._open_ids = np.concatenate(packs) if packs else np.empty(0, np.int64)
        self._pack_of = np.repeat(np.arange(len(packs)), [p.size for p in packs]).astype(np.int64)
        self._room = room
        self._age = age
