"""Columns of the user's that ride along with packed batches (`keep_columns`): for each sample
(or piece of a split sample) of a batch, in the order of its `sample_ids`, the sample's value
of each kept column, so a pack can be traced back to the user's own document ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streaming.errors import PlanError

# The keys a PackCollator batch already holds, plus `sample_ids`: a kept column cannot take one.
TAKEN_KEYS = frozenset({"input_ids", "labels", "position_ids", "cu_seqlens", "seq_lens",
                        "seq_is_pad", "max_seqlen", "pack_lengths", "attention_mask",
                        "sample_ids"})


def check_keep_columns(keep_columns: str | Sequence[str] | None) -> tuple[str, ...]:
    """The column names to keep, checked: strings, each once, none a batch key already.

    Args:
        keep_columns: a column name, a sequence of them, or None (none kept).
    """
    if keep_columns is None:
        return ()
    names = (keep_columns,) if isinstance(keep_columns, str) else tuple(keep_columns)
    for name in names:
        if not isinstance(name, str) or not name:
            raise PlanError(f"keep_columns must hold column names, got {name!r}")
        if name in TAKEN_KEYS:
            raise PlanError(f"keep_columns: {name!r} is a key of every packed batch already; "
                            "keep a column of another name")
    if len(set(names)) != len(names):
        raise PlanError(f"keep_columns names a column twice: {list(names)}")
    return names


class KeptValues:
    """The kept columns' values of one batch's samples, gathered as they are read.

    Args:
        columns: the checked names (`check_keep_columns`).
    """

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.values: dict[str, list[Any]] = {name: [] for name in columns}

    def add(self, sample_id: int, sample: Mapping[str, Any]) -> None:
        """Record `sample`'s kept values (a PlanError names a column it lacks)."""
        for name in self.columns:
            try:
                self.values[name].append(sample[name])
            except KeyError:
                raise PlanError(f"keep_columns: sample {sample_id} has no column {name!r}; it "
                                f"has {sorted(sample)}") from None

    def collated(self) -> dict[str, Any]:
        """Each kept column as a 1-D tensor when its values are numbers (one per entry of
        `sample_ids`), else as a list."""
        import torch

        out: dict[str, Any] = {}
        for name, values in self.values.items():
            array = np.asarray(values) if values else np.zeros(0, np.int64)
            numeric = array.ndim == 1 and (np.issubdtype(array.dtype, np.number)
                                           or array.dtype == np.bool_)
            out[name] = torch.from_numpy(array.copy()) if numeric else list(values)
        return out
