"""An epoch in a fresh process (no shared cache table inherited), for tests of what a second
run finds on disk."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import Any

from tests.support.fresh import fresh_context


def _epoch(kwargs: dict[str, Any]) -> tuple[list[int], dict]:
    from streaming import StreamingDataset

    ds = StreamingDataset(**kwargs)
    try:
        return [int(sample["id"]) for sample in ds], ds.cache_stats().as_dict()
    finally:
        ds.close()


def epoch_in_new_process(**kwargs: Any) -> tuple[list[int], dict]:
    """The ids of one epoch of StreamingDataset(**kwargs) and its cache stats, from a fresh
    process."""
    with ProcessPoolExecutor(1, mp_context=fresh_context()) as pool:
        return pool.submit(_epoch, kwargs).result(timeout=120)
