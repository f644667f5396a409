"""A DataLoader iterator's batches without torch's per-batch profiler annotation.

torch offers no switch for it: `_BaseDataLoaderIter.__next__` wraps every batch in
`record_function`, whose exit is a torch op that releases the GIL, so each batch waits for the
GIL's switch interval whenever another Python thread of the training process is busy. This is
the one place that repeats `__next__`'s steps through the iterator's private attributes. It does
so only when `__next__` touches exactly the names it was written against (TORCH_NEXT_NAMES);
on any other torch the iterator is used as it is, and tests/loader/test_loader_next.py fails
so the steps below get checked against the new `__next__`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data.dataloader import _BaseDataLoaderIter

# Every global and attribute name torch 2.13's `_BaseDataLoaderIter.__next__` uses: the
# annotation, the steps repeated below, and the warning for an IterableDataset that yields more
# than its `len` (left out below).
TORCH_NEXT_NAMES = frozenset((
    "torch", "autograd", "profiler", "record_function", "_profile_name",
    "_sampler_iter", "_reset", "_next_data", "_num_yielded",
    "_dataset_kind", "_DatasetKind", "Iterable", "_IterableDataset_len_called", "_dataset",
    "_num_workers", "warnings", "warn",
))


def torch_next_names() -> frozenset[str]:
    """The names the installed torch's `_BaseDataLoaderIter.__next__` uses."""
    return frozenset(_BaseDataLoaderIter.__next__.__code__.co_names)


def next_is_known() -> bool:
    """Whether the installed torch's `__next__` is the one the steps below repeat."""
    return torch_next_names() == TORCH_NEXT_NAMES


_KNOWN = next_is_known()


def unannotated(it: Iterator[Any]) -> Iterator[Any]:
    """The batches of `it`, a DataLoader iterator, without the per-batch `record_function`
    unless a torch profiler is recording (then every batch goes through `__next__` as usual).
    Any other iterator, or a DataLoader iterator of an unknown torch, is used as it is."""
    if not (_KNOWN and isinstance(it, _BaseDataLoaderIter)):
        yield from it
        return
    profiling = torch._C._autograd._profiler_enabled  # any torch profiler, legacy or kineto
    while True:
        if profiling():
            try:
                yield next(it)
            except StopIteration:
                return
            continue
        if it._sampler_iter is None:
            it._reset()
        try:
            data = it._next_data()
        except StopIteration:
            return
        it._num_yielded += 1
        yield data
