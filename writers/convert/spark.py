"""Spark DataFrame -> MDS (extra `spark`): one MDSWriter per partition, one merged index.

Each partition writes `out/part-XXXXX/` on its executor and the driver publishes one merged
index after every partition finished (writers/convert/parts.py), in partition order, so the
dataset's order is the DataFrame's order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from streaming.errors import EncodeError, require
from writers.convert.infer import apply_coercers, coercers
from writers.convert.parts import (
    PartResult,
    PartsTarget,
    check_columns,
    prepare_target,
    publish_parts,
    write_part,
)
from writers.convert.source import Transform, samples_from

_SCALARS = {
    "LongType": "int", "IntegerType": "int32", "ShortType": "int16", "ByteType": "int8",
    "FloatType": "float32", "DoubleType": "float64", "StringType": "str",
    "BinaryType": "bytes", "BooleanType": "json", "DecimalType": "str_decimal",
}
_ARRAY = {"LongType": "int64", "IntegerType": "int32", "ShortType": "int16", "ByteType": "int8",
          "FloatType": "float32", "DoubleType": "float64"}


def spark_encoding(data_type: Any) -> str | None:
    """The MDS encoding for a Spark SQL type, or None when there is no obvious one."""
    name = type(data_type).__name__
    if name in _SCALARS:
        return _SCALARS[name]
    if name == "ArrayType":
        inner = type(data_type.elementType).__name__
        return f"ndarray:{_ARRAY[inner]}" if inner in _ARRAY else "json"
    if name in ("MapType", "StructType"):
        return "json"
    return None


def columns_from_schema(schema: Any) -> dict[str, str]:
    """Encodings for every field of a DataFrame schema; EncodeError for unsupported types."""
    columns: dict[str, str] = {}
    for field in schema.fields:
        encoding = spark_encoding(field.dataType)
        if encoding is None:
            raise EncodeError(
                f"column {field.name!r} has Spark type {field.dataType.simpleString()} with no "
                f"obvious MDS encoding; pass columns={{{field.name!r}: '<encoding>'}}"
            )
        columns[field.name] = encoding
    return columns


def _partition_writer(target: PartsTarget, columns: dict[str, str],
                      transform: Transform | None, writer_args: dict[str, Any]) -> Callable:
    """The function each Spark task runs over its partition's rows."""

    def write(index: int, rows: Iterator[Any]) -> Iterator[PartResult]:
        coerce, where = coercers(columns), f"Spark partition {index}"
        samples = (apply_coercers(sample, coerce, where) for row in rows
                   for sample in samples_from(row.asDict(recursive=True), transform, where))
        yield write_part(target, index, columns, samples, writer_args)

    return write


def dataframe_to_mds(
    df: Any,
    out: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    *,
    compression: str | None = "zstd",
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    transform: Transform | None = None,
    merge_index: bool = True,
    mode: str = "create",
) -> dict[str, Any]:
    """Write `df` as MDS under `out` (one sub-dataset per partition); returns counts.

    `columns` defaults to encodings derived from the schema (a None value drops a column);
    with a `transform`, give the columns of the samples it produces. `merge_index=False`
    leaves only the parts' own index.json files (no root index). `mode` is "create",
    "append" or "overwrite" (docs/writing.md).
    """
    require("pyspark", feature="Spark conversion", extra="spark")
    if columns is None and transform is not None:
        raise EncodeError("with a transform, pass columns= for the samples it produces")
    chosen = columns_from_schema(df.schema) if transform is None else {}
    chosen.update(columns or {})
    final = {name: enc for name, enc in sorted(chosen.items()) if enc is not None}
    target = prepare_target(out, mode, "dataframe_to_mds")
    check_columns(target, final, compression)
    args = {"compression": compression, "hashes": hashes, "size_limit": size_limit,
            "max_workers": 1}
    results = df.rdd.mapPartitionsWithIndex(_partition_writer(target, final, transform, args))
    parts = results.collect()
    index = publish_parts(target, parts) if merge_index else None
    out_value: Any = target.location if target.remote else Path(target.location)
    if index is not None and not target.remote:
        index = Path(index)
    return {"out": out_value, "index": index, "parts": len(parts),
            "samples": sum(p.samples for p in parts), "columns": final}
