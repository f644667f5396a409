"""Early checks of StreamingDataLoader arguments, so a mistake fails (or warns) at construction
instead of yielding nothing or quietly batching differently from the plan."""

from __future__ import annotations

import operator
import warnings

from streaming.errors import PlanError
from streaming.loader.dataset_protocols import (
    BatchPlannedDataset,
    CacheCheckedDataset,
    ResumableDataset,
    planned_by,
)


def check_batch_size(dataset: object, batch_size: object) -> None:
    """Refuse a batch_size that is not None or a positive int; warn when the dataset planned
    its epoch for another `batch_size` (padding and batching_method follow the dataset's)."""
    if batch_size is None:
        return
    try:
        size = operator.index(batch_size)  # type: ignore[arg-type]
    except TypeError:
        raise PlanError(f"batch_size must be a positive int or None, got {batch_size!r}") from None
    if size <= 0:
        raise PlanError(f"batch_size must be a positive int or None, got {batch_size!r}")
    planned = dataset.batch_size if isinstance(dataset, BatchPlannedDataset) else None
    if isinstance(planned, int) and planned != size:
        warnings.warn(
            f"StreamingDataLoader(batch_size={size}) differs from the dataset's "
            f"batch_size={planned}: the dataset pads its epoch and applies batching_method per "
            f"batch of {planned}, so loader batches straddle planned ones; pass the same value "
            "to both", UserWarning, stacklevel=3)


def check_cache_for_workers(dataset: object, num_workers: int) -> None:
    """Refuse (CacheLimitError naming the minimum) a dataset's cache_limit that its node's plan
    cannot run in once each rank reads through `num_workers` DataLoader workers: the dataset
    checked it at construction for one reader per rank, not knowing its loader's workers.

    Args:
        dataset: the loader's dataset (a packed dataset's source is checked).
        num_workers: the loader's worker processes.
    """
    source = planned_by(dataset)
    if num_workers > 1 and isinstance(source, CacheCheckedDataset):
        source.check_cache_for_workers(num_workers)


def check_resumable(dataset: object, num_workers: int, batch_size: int | None) -> None:
    """Warn when a mid-epoch resume of this loader would fail: a dataset without `batch_size`
    whose samples several workers batch cannot map a position to the workers' batches (a
    dataset that yields whole batches, `batch_size=None`, places its own)."""
    planned = planned_by(dataset)
    if num_workers > 1 and batch_size is not None and isinstance(dataset, ResumableDataset) \
            and isinstance(planned, BatchPlannedDataset) and planned.batch_size is None:
        warnings.warn(
            f"the dataset has no batch_size and this loader has num_workers={num_workers}: "
            "training runs, but resuming mid-epoch will raise PlanError; pass the loader's "
            "batch_size to the dataset too", UserWarning, stacklevel=3)
