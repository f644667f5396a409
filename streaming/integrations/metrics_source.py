"""Finding the StreamingDataLoader behind what a trainer holds, for the metrics callbacks."""

from __future__ import annotations

from typing import Any, Protocol


class MetricsSource(Protocol):
    """Anything with loader metrics (StreamingDataLoader, StreamingDataset)."""

    def metrics(self) -> dict[str, float]: ...


def find_source(*candidates: Any) -> MetricsSource | None:
    """The first candidate, or what it wraps (`.loader`, `.iterables`, `.dataloader`,
    `.train_dataloader`), that has `metrics()`; None if there is none."""
    seen: set[int] = set()
    todo = [c for c in candidates if c is not None]
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        if callable(getattr(type(item), "metrics", None)):
            return item
        for name in ("loader", "iterables", "dataloader", "train_dataloader"):
            inner = getattr(item, name, None)
            if isinstance(inner, dict):
                todo.extend(inner.values())
            elif isinstance(inner, list | tuple):
                todo.extend(inner)
            elif inner is not None and not callable(inner):
                todo.append(inner)
    return None


def prefixed(source: MetricsSource, prefix: str) -> dict[str, float]:
    """`source.metrics()` with each key under `prefix`."""
    return {f"{prefix}{key}": value for key, value in source.metrics().items()}
