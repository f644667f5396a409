"""Early checks of StreamingDataLoader arguments, so a mistake fails (or warns) at construction
instead of yielding nothing or quietly batching differently from the plan."""

from __future__ import annotations

import operator
import warnings

from streaming.errors import PlanError


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
    planned = getattr(dataset, "batch_size", None)
    if isinstance(planned, int) and planned != size:
        warnings.warn(
            f"StreamingDataLoader(batch_size={size}) differs from the dataset's "
            f"batch_size={planned}: the dataset pads its epoch and applies batching_method per "
            f"batch of {planned}, so loader batches straddle planned ones; pass the same value "
            "to both", UserWarning, stacklevel=3)
