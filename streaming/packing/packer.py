"""The streaming packer contract shared by every strategy, and the overlong-sample stage.

A packer consumes (sample_id, length) pairs and emits packs: int64 arrays of sample ids whose
lengths sum to at most `packing_length`. Its state is plain data, so a resumed run emits exactly
the packs the uninterrupted run would have.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from streaming.errors import PlanError, StateMismatchError

OVERLONG_MODES = ("split", "alone")


def as_int64(values: Any, what: str) -> np.ndarray:
    """Return `values` as a 1-D int64 array, refusing floats, negatives and other shapes."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise PlanError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise PlanError(f"{what} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise PlanError(f"{what} must be non-negative, found {int(arr.min())}")
    return arr


def split_packs(ids: np.ndarray, keys: np.ndarray) -> list[np.ndarray]:
    """Group `ids` into one array per distinct key, packs ordered by key, ids by position."""
    if ids.size == 0:
        return []
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    cuts = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.split(ids[order], cuts)


class Packer(ABC):
    """Streaming packer: `push` samples in order, collect finished packs, `flush` at the end.

    Overlong samples (longer than `packing_length`) are dropped when `filter_overlong`; otherwise
    `overlong="alone"` emits one pack holding just that sample, and `overlong="split"` emits
    `length // packing_length` full single-sample packs at once and packs the remainder like any
    other sample. A split sample's id therefore appears several times: in emission order its
    occurrences cover tokens [0, L), [L, 2L), ... and finally the remainder.

    Args:
        packing_length: Tokens per pack (the capacity), at least 1.
        filter_overlong: Drop samples longer than `packing_length` (counted in `dropped`).
        overlong: Without filtering: "split" (default) or "alone", as above.
    """

    name: ClassVar[str]

    def __init__(
        self, packing_length: int, *, filter_overlong: bool = True, overlong: str = "split"
    ) -> None:
        if isinstance(packing_length, bool) or not isinstance(packing_length, (int, np.integer)):
            raise PlanError(f"packing_length must be an int, got {packing_length!r}")
        if packing_length < 1:
            raise PlanError(f"packing_length must be >= 1, got {packing_length}")
        if overlong not in OVERLONG_MODES:
            raise PlanError(f"overlong must be one of {OVERLONG_MODES}, got {overlong!r}")
        self.packing_length = int(packing_length)
        self.filter_overlong = bool(filter_overlong)
        self.overlong = overlong
        self.dropped = 0

    # ---- public verbs -------------------------------------------------------------------

    def push(self, sample_id: int, length: int) -> list[np.ndarray]:
        """Add one sample; return the packs this completes (possibly none), in emission order."""
        length = int(length)
        if length < 0:
            raise PlanError(f"sample {sample_id} has negative length {length}")
        cap = self.packing_length
        if length <= cap:
            return self._push_one(int(sample_id), length)
        return self._push_overlong(int(sample_id), length)

    def push_many(self, ids: Any, lengths: Any) -> list[np.ndarray]:
        """Push many samples at once: the same packs as pushing them one by one, vectorised."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        lengths = as_int64(lengths, "lengths")
        if ids.shape != lengths.shape:
            raise PlanError(f"ids ({ids.size}) and lengths ({lengths.size}) differ in size")
        over = lengths > self.packing_length
        if not over.any():
            return self._push_many(ids, lengths)
        if self.filter_overlong:
            self.dropped += int(over.sum())
            keep = ~over
            return self._push_many(ids[keep], lengths[keep])
        out: list[np.ndarray] = []
        start = 0
        for pos in np.flatnonzero(over).tolist():
            if pos > start:
                out += self._push_many(ids[start:pos], lengths[start:pos])
            out += self._push_overlong(int(ids[pos]), int(lengths[pos]))
            start = pos + 1
        if start < ids.size:
            out += self._push_many(ids[start:], lengths[start:])
        return out

    @abstractmethod
    def flush(self) -> list[np.ndarray]:
        """Emit every pack still held, leaving the packer empty."""

    def state_dict(self) -> dict[str, Any]:
        """Plain-data state: configuration (to detect mismatch) plus the carried samples."""
        return {**self._identity(), "dropped": self.dropped, **self._state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state produced by `state_dict` of an identically configured packer."""
        for key, value in self._identity().items():
            if key not in state:
                raise StateMismatchError(f"packer state lacks {key!r}")
            if state[key] != value:
                raise StateMismatchError(
                    f"packer state has {key}={state[key]!r} but this packer has {value!r}"
                )
        self.dropped = int(state.get("dropped", 0))
        self._load(state)

    # ---- strategy hooks -----------------------------------------------------------------

    @abstractmethod
    def _push_many(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """Pack samples that all fit (length <= packing_length)."""

    def _push_one(self, sample_id: int, length: int) -> list[np.ndarray]:
        """Pack one sample that fits; strategies override this when a scalar path is cheaper."""
        return self._push_many(np.array([sample_id], np.int64), np.array([length], np.int64))

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """The carried samples as plain lists."""

    @abstractmethod
    def _load(self, state: dict[str, Any]) -> None:
        """Inverse of `_state`."""

    def _config(self) -> dict[str, Any]:
        """Strategy parameters that a loaded state must agree with."""
        return {}

    def _identity(self) -> dict[str, Any]:
        return {
            "strategy": self.name,
            "packing_length": self.packing_length,
            "filter_overlong": self.filter_overlong,
            "overlong": self.overlong,
            **self._config(),
        }

    # ---- overlong samples ---------------------------------------------------------------

    def _push_overlong(self, sample_id: int, length: int) -> list[np.ndarray]:
        if self.filter_overlong:
            self.dropped += 1
            return []
        alone = np.array([sample_id], np.int64)
        if self.overlong == "alone":
            return [alone]
        full, tail = divmod(length, self.packing_length)
        out = [alone.copy() for _ in range(full)]
        if tail:
            out += self._push_one(sample_id, tail)
        return out


def pairs_state(ids: Any, lengths: Any) -> dict[str, list[int]]:
    """Pending samples as plain lists (the common state of buffering strategies)."""
    return {
        "pending_ids": np.asarray(ids, np.int64).tolist(),
        "pending_lengths": np.asarray(lengths, np.int64).tolist(),
    }


def load_pairs(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of `pairs_state`, validating that both lists have the same size."""
    ids = np.asarray(state.get("pending_ids", []), dtype=np.int64).reshape(-1)
    lengths = as_int64(np.asarray(state.get("pending_lengths", []), np.int64), "pending_lengths")
    if ids.shape != lengths.shape:
        raise StateMismatchError("packer state: pending_ids and pending_lengths differ in size")
    return ids, lengths


class BufferedPacker(Packer):
    """A strategy that collects `group` samples, then packs them together (window, best_fit)."""

    def __init__(self, packing_length: int, group: int, what: str, **options: Any) -> None:
        super().__init__(packing_length, **options)
        if isinstance(group, bool) or not isinstance(group, (int, np.integer)) or group < 1:
            raise PlanError(f"{what} must be a positive int, got {group!r}")
        self._group = int(group)
        self._ids: list[int] = []
        self._lengths: list[int] = []

    @abstractmethod
    def _pack_groups(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """Pack whole groups (the size of `ids` is a multiple of the group size)."""

    @abstractmethod
    def _pack_rest(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """Pack the last, partial group and emit everything still held."""

    def _push_one(self, sample_id: int, length: int) -> list[np.ndarray]:
        self._ids.append(sample_id)
        self._lengths.append(length)
        if len(self._ids) < self._group:
            return []
        return self._pack_groups(*self._take())

    def _push_many(self, ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        held, held_lengths = self._take()
        all_ids = np.concatenate([held, ids])
        all_lengths = np.concatenate([held_lengths, lengths])
        full = all_ids.size // self._group * self._group
        self._ids, self._lengths = all_ids[full:].tolist(), all_lengths[full:].tolist()
        return self._pack_groups(all_ids[:full], all_lengths[:full]) if full else []

    def flush(self) -> list[np.ndarray]:
        return self._pack_rest(*self._take())

    def _take(self) -> tuple[np.ndarray, np.ndarray]:
        ids = np.array(self._ids, dtype=np.int64)
        lengths = np.array(self._lengths, dtype=np.int64)
        self._ids, self._lengths = [], []
        return ids, lengths

    def _state(self) -> dict[str, Any]:
        return pairs_state(self._ids, self._lengths)

    def _load(self, state: dict[str, Any]) -> None:
        ids, lengths = load_pairs(state)
        if ids.size >= self._group:
            raise StateMismatchError(
                f"{self.name} state holds {ids.size} pending samples, its group is {self._group}"
            )
        self._ids, self._lengths = ids.tolist(), lengths.tolist()
