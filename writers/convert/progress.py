"""A tqdm bar over input units (bytes, rows or records) that also shows samples written and,
for an input of several files, how many files are done and how many input bytes that is."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from streaming.util.quantities import human_bytes
from writers.convert.source import Piece


@dataclass
class FileTally:
    """Which input files are converted, from how far each piece has got.

    Args:
        spans: each file's [start, stop) on the input's coordinate line.
        file_bytes: each file's size in bytes.
        pieces: the conversion's pieces (finished ones are marked with `finish`).
    """

    spans: list[tuple[int, int]]
    file_bytes: list[int]
    pieces: list[Piece]
    reached: dict[int, int] = field(default_factory=dict)  # piece index -> units done

    def advance(self, piece: int, units: int) -> None:
        self.reached[piece] = self.reached.get(piece, 0) + units

    def finish(self, piece: Piece) -> None:
        self.reached[piece.index] = piece.stop - piece.start

    def covered(self) -> list[float]:
        """Each file's converted fraction."""
        frontier = [(p.start, p.stop, p.start + self.reached.get(p.index, 0))
                    for p in self.pieces]
        result = []
        for start, stop in self.spans:
            done = sum(max(0, min(stop, at) - max(start, lo))
                       for lo, hi, at in frontier if lo < stop and hi > start)
            result.append(done / (stop - start) if stop > start else 1.0)
        return result

    def summary(self) -> dict[str, str]:
        fractions = self.covered()
        files = sum(1 for f in fractions if f >= 1.0)
        read = sum(f * b for f, b in zip(fractions, self.file_bytes))
        return {"files": f"{files}/{len(self.spans)}", "read": human_bytes(read)}


class Progress:
    """Progress of one conversion; silent when `enabled` is False."""

    def __init__(self, total: int | None, unit: str, label: str, enabled: bool,
                 tally: FileTally | None = None, initial: int = 0) -> None:
        """`initial`: units an earlier run converted already (not counted in the rate)."""
        self.samples = 0
        self.tally = tally
        self._bar: Any = None
        self._last = 0.0
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total or None, initial=initial, unit=unit, unit_scale=True,
                             unit_divisor=1024 if unit == "B" else 1000,
                             desc=f"convert {label}", dynamic_ncols=True)

    def update(self, units: int, samples: int, piece: int | None = None) -> None:
        """Add `units` converted (of piece number `piece`, when known) and `samples` written."""
        self.samples += samples
        if self.tally is not None and piece is not None and units:
            self.tally.advance(piece, units)
        if self._bar is None:
            return
        if units:
            self._bar.update(units)
        now = time.monotonic()
        if now - self._last > 0.5:
            self._bar.set_postfix(self._postfix(), refresh=False)
            self._last = now

    def _postfix(self) -> dict[str, Any]:
        extra = self.tally.summary() if self.tally is not None else {}
        return {**extra, "samples": self.samples}

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix(self._postfix(), refresh=False)
            self._bar.close()
