"""Arrow record batches as sample dicts, column by column: numeric list columns become numpy
views of the batch's values buffer (no Python list per sample), other columns Python values."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


def _values(array: Any) -> Sequence[Any]:
    import pyarrow as pa

    kind = array.type
    numeric_lists = (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
        pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type))
    if numeric_lists and len(array) and array.null_count == 0 and not array.values.null_count:
        offsets = array.offsets.to_numpy()
        flat = array.values.to_numpy(zero_copy_only=False)
        return np.split(flat[offsets[0]:offsets[-1]], offsets[1:-1] - offsets[0])
    return array.to_pylist()


def arrow_records(table: Any) -> Iterator[dict[str, Any]]:
    """The rows of an Arrow table (or record batch) as dicts, in order."""
    batches = table.to_batches() if hasattr(table, "to_batches") else [table]
    for batch in batches:
        names = batch.schema.names
        columns = [_values(batch.column(i)) for i in range(batch.num_columns)]
        for row in zip(*columns):
            yield dict(zip(names, row))
