"""Default collate of StreamingDataLoader: a list of samples -> a few large tensors per batch,
column by column (`streaming.dataset.column_batch`: equal-shape arrays stacked, ragged ones a
`Ragged`, numbers one tensor, strings and bytes kept as lists); `batch_length`, the samples in a
collated batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_convert

from streaming.dataset.column_batch import SHARED_MIN_BYTES, Ragged, collate_column

__all__ = ["SHARED_MIN_BYTES", "Ragged", "batch_length", "collate", "collate_column",
           "collate_numpy", "convert", "tensors"]


def collate(batch: Sequence[Any], *, numpy: bool = False) -> Any:
    """Collate a list of samples (dicts are collated column by column, see the module doc).

    `numpy=True` builds numpy arrays instead of tensors (and a `Ragged` of numpy arrays):
    StreamingDataLoader's workers send those, pickled in one piece through the worker pipe, and
    `tensors` turns them into tensors in the main process without a copy. Sending tensors
    instead costs a shared-memory file and a file-descriptor handshake per tensor (~0.6 ms).
    """
    if not len(batch):
        return []
    first = batch[0]
    if isinstance(first, Mapping):
        return {key: collate_column([sample[key] for sample in batch], numpy=numpy)
                for key in first}
    return collate_column(list(batch), numpy=numpy)


def collate_numpy(batch: Sequence[Any]) -> Any:
    """`collate(batch, numpy=True)` (a picklable collate_fn for DataLoader workers)."""
    return collate(batch, numpy=True)


def tensors(batch: Any) -> Any:
    """A `collate(..., numpy=True)` batch with its numpy arrays wrapped as tensors (no copy)."""
    if isinstance(batch, Mapping):
        return {key: tensors(value) for key, value in batch.items()}
    if isinstance(batch, np.ndarray):
        return torch.from_numpy(batch)
    if isinstance(batch, Ragged) and isinstance(batch.offsets, np.ndarray):
        values = batch.values
        values = torch.from_numpy(values) if isinstance(values, np.ndarray) else values
        return Ragged(values, torch.from_numpy(batch.offsets))
    return batch


def convert(sample: Any) -> Any:
    """One unbatched sample (DataLoader batch_size=None): numeric arrays become tensors, copied
    when read-only (zero-copy shard views) so torch does not warn; anything else goes through
    torch's `default_convert` as usual."""
    if isinstance(sample, Mapping):
        return {key: convert(value) for key, value in sample.items()}
    if isinstance(sample, np.ndarray) and sample.dtype.kind in "biuf":
        return torch.from_numpy(sample if sample.flags.writeable else sample.copy())
    return default_convert(sample)


_ARRAYS = (torch.Tensor, np.ndarray)
_NESTED = (torch.Tensor, np.ndarray, dict, list, tuple)


def batch_length(batch: Any) -> int | None:
    """Number of samples in a collated batch: the leading size of its first array-like leaf."""
    if isinstance(batch, dict):
        for value in batch.values():
            batch = value
            break
        else:
            return None
    if isinstance(batch, _ARRAYS):
        shape = batch.shape
        return int(shape[0]) if shape else None
    if isinstance(batch, Ragged):
        return len(batch)
    if isinstance(batch, dict):
        return batch_length(batch)
    if isinstance(batch, list | tuple):
        if batch and isinstance(batch[0], _NESTED):
            return batch_length(batch[0])
        return len(batch)
    return None
