"""One column of a batch, collated: the form of the batches `StreamingDataset.iter_batches`
yields and `streaming.loader.default_collate` builds from samples.

Each column is copied once, straight into the batch buffer (allocated in shared memory inside a
DataLoader worker, so torch passes it to the main process without another copy or a pickle):
equal-shape arrays are stacked, ragged arrays become one concatenated tensor plus offsets
(`Ragged`), numbers become one tensor, strings and bytes stay lists. The copy also makes the
batch writable, so torch never warns about the read-only zero-copy arrays a sample holds.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from streaming.coord.world_detect import in_worker

__all__ = ["SHARED_MIN_BYTES", "Ragged", "collate_column"]

_TORCH_DTYPES: dict[np.dtype, torch.dtype] = {}


@dataclass
class Ragged:
    """Variable-length arrays of one column: `values` holds them concatenated along the first
    axis and sample i is `values[offsets[i]:offsets[i + 1]]` (`offsets` is int64, n + 1 long)."""

    values: torch.Tensor
    offsets: torch.Tensor

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> torch.Tensor:
        """Sample i's array, a view of `values`."""
        return self.values[int(self.offsets[i]):int(self.offsets[i + 1])]

    @property
    def lengths(self) -> torch.Tensor:
        """First-axis length of every sample (int64)."""
        return self.offsets[1:] - self.offsets[:-1]

    def split(self) -> list[torch.Tensor]:
        """Every sample's array, as views of `values`."""
        return list(self.values.split(self.lengths.tolist()))

    def padded(self, value: float = 0) -> torch.Tensor:
        """An [n, longest, ...] tensor, short samples filled with `value`."""
        return torch.nn.utils.rnn.pad_sequence(self.split(), batch_first=True,
                                               padding_value=value)

    def to(self, *args: Any, **kwargs: Any) -> Ragged:
        """Both tensors moved/cast like `Tensor.to` (offsets keep their int64 dtype)."""
        offsets = self.offsets.to(*[a for a in args if not isinstance(a, torch.dtype)],
                                  **{k: v for k, v in kwargs.items() if k != "dtype"})
        return Ragged(self.values.to(*args, **kwargs), offsets)

    def pin_memory(self) -> Ragged:
        """Pinned copy (called by DataLoader(pin_memory=True))."""
        return Ragged(self.values.pin_memory(), self.offsets.pin_memory())


def collate_column(values: list[Any] | np.ndarray, *, numpy: bool = False) -> Any:
    """One column of a batch: a tensor, a `Ragged`, or the list itself (str, bytes, other)."""
    wrap = _keep if numpy else torch.from_numpy
    if isinstance(values, np.ndarray):  # numpy scalars already decoded into one array
        return wrap(values.copy()) if values.dtype.kind in "biuf" else list(values)
    first = values[0]
    if isinstance(first, np.ndarray):
        return _arrays(values, numpy)
    if isinstance(first, torch.Tensor):
        return _arrays([v.numpy(force=True) for v in values], numpy)
    if isinstance(first, (str, bytes, bytearray, memoryview, Mapping)):
        return values  # a Mapping here is a json value: its keys may differ sample to sample
    if isinstance(first, (np.generic, numbers.Number)) and _all(values, type(first)):
        array = np.array(values)
        if array.dtype.kind in "biuf":
            return wrap(array)
    return values


def _keep(array: np.ndarray) -> np.ndarray:
    return array


def _all(values: list[Any], kind: type) -> bool:
    return all(type(v) is kind for v in values)


def _arrays(arrays: list[Any], numpy: bool) -> Any:
    # The checks run as C-level maps: per-sample Python here would cost as much as the copy.
    if set(map(type, arrays)) != {np.ndarray}:
        return arrays
    dtypes = set(map(_dtype_of, arrays))
    dtype = arrays[0].dtype
    if len(dtypes) != 1 or dtype.kind not in "biuf":
        return arrays
    shapes = list(map(_shape_of, arrays))
    if shapes.count(shapes[0]) == len(shapes):
        out, view = _empty((len(arrays), *shapes[0]), dtype, numpy)
        np.stack(arrays, out=view)
        return out
    trailing = shapes[0][1:]
    if set(map(len, shapes)) != {len(shapes[0])} or not shapes[0] or (
            trailing and any(s[1:] != trailing for s in shapes)):
        return arrays
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum(list(map(len, arrays)), out=offsets[1:])
    out, view = _empty((int(offsets[-1]), *trailing), dtype, numpy)
    np.concatenate(arrays, out=view)
    return Ragged(out, offsets if numpy else torch.from_numpy(offsets))


_dtype_of = operator.attrgetter("dtype")
_shape_of = operator.attrgetter("shape")


SHARED_MIN_BYTES = 1 << 20  # from this size, worker batches travel in shared memory


def _empty(shape: tuple[int, ...], dtype: np.dtype, numpy: bool
           ) -> tuple[torch.Tensor | np.ndarray, np.ndarray]:
    """A new tensor (numpy array with `numpy`) and its numpy view; tensors are allocated in
    shared memory inside a DataLoader worker, so torch sends them without another copy. Large
    `numpy` requests also get a shared tensor: one handshake beats pickling megabytes."""
    if numpy and int(np.prod(shape, dtype=np.int64)) * dtype.itemsize < SHARED_MIN_BYTES:
        array = np.empty(shape, dtype)
        return array, array
    tdtype = _TORCH_DTYPES.get(dtype)
    if tdtype is None:
        tdtype = _TORCH_DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype)).dtype
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if in_worker() and nbytes:
        storage = torch.UntypedStorage._new_shared(nbytes)
        out = torch.empty(0, dtype=tdtype).set_(storage, 0, shape)
    else:
        out = torch.empty(shape, dtype=tdtype)
    return out, out.numpy()
