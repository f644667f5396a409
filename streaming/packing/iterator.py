"""Pack on the fly: pull (sample_id, sample) pairs from any iterable, push their lengths into a
streaming packer, and yield collated packs (or batches of packs), with exact resumption."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from streaming.errors import PlanError, StateMismatchError
from streaming.packing.collate import PackCollator
from streaming.packing.strategies import make_packer


class PackedIterator:
    """Iterate collated packs built from `source` samples' `column` token arrays.

    The packer sees positions in the source (0, 1, ...), not sample ids, so a sample that the
    source yields twice is packed twice. `state_dict()` holds the packer state, the packs
    emitted but not yet yielded and, for each held position, its sample id. To resume, either
    give the same source again (its first `consumed` items are skipped, and the held samples'
    tokens are picked up on the way) or, with `skip_consumed=False`, a source that already
    starts after them plus `lookup(sample_id) -> sample` to refetch the held samples.
    """

    def __init__(
        self,
        source: Iterable[tuple[int, Mapping[str, Any]]],
        column: str = "tokens",
        packing_length: int = 32000,
        strategy: str = "best_fit",
        *,
        filter_overlong: bool = True,
        overlong: str = "split",
        buffer_size: int | None = None,
        collator: PackCollator | None = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        lookup: Callable[[int], Mapping[str, Any]] | None = None,
        skip_consumed: bool = True,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise PlanError(f"batch_size must be >= 1 or None, got {batch_size}")
        self.source = source
        self.column = column
        self.packing_length = packing_length
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.lookup = lookup
        self.skip_consumed = skip_consumed
        self.collator = collator or PackCollator(packing_length)
        if self.collator.packing_length != packing_length:
            raise PlanError(
                f"collator packing_length {self.collator.packing_length} != {packing_length}"
            )
        self._options = {
            "strategy": strategy,
            "packing_length": packing_length,
            "filter_overlong": filter_overlong,
            "overlong": overlong,
            "buffer_size": buffer_size,
        }
        self._loaded: dict[str, Any] | None = None
        self._reset()

    def _reset(self) -> None:
        self._packer = make_packer(**self._options)
        self._ready: deque[np.ndarray] = deque()
        self._tokens: dict[int, np.ndarray] = {}  # position -> tokens still to pack
        self._sample_id: dict[int, int] = {}  # position -> sample id, for held positions
        self._offset: dict[int, int] = {}  # position -> tokens already emitted (split samples)
        self._consumed = 0

    # ---- iteration ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        skip = 0
        if self._loaded is not None:
            skip = self._restore(self._loaded)
            self._loaded = None
        else:
            self._reset()
        want = self.batch_size or 1
        for index, (sample_id, sample) in enumerate(self.source):
            if index < skip:
                if index in self._sample_id:
                    self._tokens[index] = self._column(sample_id, sample)
                continue
            tokens = self._column(sample_id, sample)
            position = self._consumed
            self._consumed += 1
            self._tokens[position] = tokens
            self._sample_id[position] = int(sample_id)
            dropped = self._packer.dropped
            self._ready.extend(self._packer.push(position, tokens.size))
            if self._packer.dropped != dropped:  # overlong and filtered: never packed
                del self._tokens[position], self._sample_id[position]
            while len(self._ready) >= want:
                yield self._emit(want)
        self._check_held()
        self._ready.extend(self._packer.flush())
        while len(self._ready) >= want or (self._ready and not self.drop_last):
            yield self._emit(min(want, len(self._ready)))
        self._ready.clear()
        self._reset()

    def _column(self, sample_id: int, sample: Mapping[str, Any]) -> np.ndarray:
        if self.column not in sample:
            raise PlanError(f"sample {sample_id} has no column {self.column!r} to pack")
        tokens = np.asarray(sample[self.column]).reshape(-1)
        if tokens.size and not np.issubdtype(tokens.dtype, np.integer):
            raise PlanError(
                f"sample {sample_id} column {self.column!r} must hold token ids, got {tokens.dtype}"
            )
        return tokens

    def _emit(self, count: int) -> dict[str, Any]:
        packs = [self._sequences(self._ready.popleft()) for _ in range(count)]
        if self.batch_size is None:
            return self.collator.pack(packs[0])
        return self.collator.batch(packs)

    def _sequences(self, pack: np.ndarray) -> list[np.ndarray]:
        """Token arrays of one pack; a split sample yields its next piece at each occurrence."""
        cap = self.packing_length
        out = []
        for position in pack.tolist():
            tokens = self._tokens[position]
            if tokens.size > cap and self._options["overlong"] == "split":
                start = self._offset.pop(position, 0)
                out.append(tokens[start : start + cap])
                if start + cap < tokens.size:  # more pieces to come: keep the sample
                    self._offset[position] = start + cap
                    continue
            else:
                out.append(tokens)
            del self._tokens[position]
            del self._sample_id[position]
        return out

    def _check_held(self) -> None:
        missing = [p for p in self._sample_id if p not in self._tokens]
        if missing:
            raise StateMismatchError(
                f"resumed source ended before held positions {missing[:5]} were seen again"
            )

    # ---- state --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Plain-data state: resume from it to get exactly the packs still to come."""
        if self._loaded is not None:
            return self._loaded
        held = set(self._packer_positions()) | {p for pack in self._ready for p in pack.tolist()}
        return {
            "packer": self._packer.state_dict(),
            "ready": [pack.tolist() for pack in self._ready],
            "held": sorted([p, self._sample_id[p]] for p in held),
            "offsets": sorted([p, o] for p, o in self._offset.items()),
            "consumed": self._consumed,
        }

    def _packer_positions(self) -> list[int]:
        state = self._packer.state_dict()
        positions = list(state.get("pending_ids", []))
        for pack in state.get("open_ids", []):
            positions += pack
        return positions

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at the next `iter()`; see the class docstring for what the source must be."""
        for key in ("packer", "ready", "held", "offsets", "consumed"):
            if key not in state:
                raise StateMismatchError(f"packed iterator state lacks {key!r}")
        if not self.skip_consumed and state["held"] and self.lookup is None:
            raise StateMismatchError(
                "resuming without skip_consumed needs lookup(sample_id) to refetch held samples"
            )
        make_packer(**self._options).load_state_dict(state["packer"])  # validate early
        self._loaded = state

    def _restore(self, state: dict[str, Any]) -> int:
        self._reset()
        self._packer.load_state_dict(state["packer"])
        self._ready.extend(np.asarray(p, dtype=np.int64) for p in state["ready"])
        self._sample_id = {int(p): int(s) for p, s in state["held"]}
        self._offset = {int(p): int(o) for p, o in state["offsets"]}
        self._consumed = int(state["consumed"])
        if self.skip_consumed:
            return self._consumed
        assert self.lookup is not None
        for position, sample_id in self._sample_id.items():
            self._tokens[position] = self._column(sample_id, self.lookup(sample_id))
        return 0
