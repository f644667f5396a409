"""Dask DataFrame or Bag -> MDS (extra `dask`): one MDSWriter per partition, one index last.

Each partition is one task writing `out/part-NNNNN/` (numbered by the partition's position, so a
task Dask reruns after losing its worker rewrites its own part); the driver publishes the merged
index once every task succeeded (writers/convert/parts.py). Runs on whatever scheduler is
active: a `distributed.Client` (LocalCluster or any Dask cluster) or Dask's local schedulers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from streaming.errors import ArgumentError, EncodeError, require
from writers.convert.infer import apply_coercers, coercers, infer_columns
from writers.convert.parquet import columns_from_arrow
from writers.convert.parts import (
    PartResult,
    PartsTarget,
    check_columns,
    prepare_target,
    publish_parts,
    write_part,
)
from writers.convert.source import Transform, samples_from

if TYPE_CHECKING:
    import dask.bag
    import dask.dataframe

    Collection = dask.dataframe.DataFrame | dask.bag.Bag

INFER_RECORDS = 200


def _is_frame(collection: Any) -> bool:
    return hasattr(collection, "columns") and hasattr(collection, "to_delayed")


def _records(partition: Any) -> Iterator[dict]:
    """A computed partition's records: a pandas DataFrame's rows or a Bag partition's items."""
    if hasattr(partition, "to_dict"):
        yield from partition.to_dict("records")
        return
    for item in partition:
        if not isinstance(item, Mapping):
            raise EncodeError(f"Dask Bag items must be dicts, got {type(item).__name__}")
        yield dict(item)


def _write_partition(partition: Any, task: int, target: PartsTarget, columns: dict[str, str],
                     transform: Transform | None, writer_args: dict[str, Any]) -> PartResult:
    where = f"Dask partition {task}"
    coerce = coercers(columns)
    samples = (apply_coercers(sample, coerce, where) for record in _records(partition)
               for sample in samples_from(record, transform, where))
    return write_part(target, task, columns, samples, writer_args)


def _columns(collection: Collection, columns: Mapping[str, str | None] | None,
             transform: Transform | None) -> dict[str, str]:
    if columns is None and transform is not None:
        raise EncodeError("with a transform, pass columns= for the samples it produces")
    given = dict(columns or {})
    if transform is not None:  # the transform runs on the workers only
        return {name: enc for name, enc in sorted(given.items()) if enc is not None}
    if _is_frame(collection):
        import pyarrow as pa

        head = collection.head(INFER_RECORDS, npartitions=-1, compute=True)
        base = columns_from_arrow(pa.Table.from_pandas(head, preserve_index=False).schema)
        records = list(_records(head))
    else:
        base, records = {}, list(_records(collection.take(INFER_RECORDS, npartitions=-1,
                                                          warn=False)))
    inferred = infer_columns(records, {**base, **{k: v for k, v in given.items() if v}})
    return {name: enc for name, enc in sorted(inferred.items())
            if given.get(name, enc) is not None}


def dask_to_mds(
    collection: Collection,
    out: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    *,
    compression: str | None = "zstd",
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    transform: Transform | None = None,
    mode: str = "create",
) -> dict[str, Any]:
    """Write a Dask DataFrame or Bag (of dicts) as MDS under `out` (a path every worker sees,
    or a URL), in partition order.

    Args:
        collection: a `dask.dataframe.DataFrame` or a `dask.bag.Bag` of dicts.
        out: the dataset folder or remote URL.
        columns: encodings; by default inferred from the first records (and, for a DataFrame,
            its Arrow types); a None value drops a column.
        compression, hashes, size_limit: as for MDSWriter.
        transform: record -> None, a sample or samples (then `columns` is required).
        mode: "create", "append" or "overwrite".

    Returns:
        {"out", "index", "parts", "samples", "columns"}.
    """
    require("dask", feature="Dask conversion", extra="dask", package="dask[distributed]")
    import dask

    if not hasattr(collection, "to_delayed"):
        raise ArgumentError(f"dask_to_mds needs a Dask DataFrame or Bag, got "
                            f"{type(collection).__name__}")
    final = _columns(collection, columns, transform)
    target = prepare_target(out, mode, "dask_to_mds")
    check_columns(target, final, compression)
    args = {"compression": compression, "hashes": hashes, "size_limit": size_limit,
            "max_workers": 1}
    write = dask.delayed(_write_partition, pure=False)
    tasks = [write(part, i, target, final, transform, args)
             for i, part in enumerate(collection.to_delayed())]
    results = list(dask.compute(*tasks))
    index = publish_parts(target, results)
    return {"out": target.location, "index": index, "parts": len(results),
            "samples": sum(r.samples for r in results), "columns": final}
