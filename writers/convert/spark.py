"""Spark DataFrame -> MDS (extra `spark`): one MDSWriter per partition, one merged index.

Each partition writes `out/part-XXXXX/` on the executor (so `out` must be a path every executor
sees: local mode or a shared file system); the driver then merges the parts' indexes in
partition order, so the dataset's order is the DataFrame's order.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from streaming.errors import EncodeError, UnsupportedFeatureError, require
from streaming.format.index import merge_index
from writers.convert.infer import apply_coercers, coercers
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


def _partition_writer(out: str, columns: dict[str, str], transform: Transform | None,
                      writer_args: dict[str, Any]) -> Callable:
    """The function each Spark task runs over its partition's rows."""

    def write(index: int, rows: Iterator[Any]) -> Iterator[tuple[int, int]]:
        from writers.mds import MDSWriter

        folder = Path(out) / f"part-{index:05d}"
        if folder.exists():  # a retried task starts over
            shutil.rmtree(folder)
        coerce, where, count = coercers(columns), f"Spark partition {index}", 0
        with MDSWriter(columns=columns, out=folder, **writer_args) as writer:
            for row in rows:
                for sample in samples_from(row.asDict(recursive=True), transform, where):
                    writer.write(apply_coercers(sample, coerce, where))
                    count += 1
        yield index, count

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
) -> dict[str, Any]:
    """Write `df` as MDS under `out` (one sub-dataset per partition); returns counts.

    `columns` defaults to encodings derived from the schema (a None value drops a column);
    with a `transform`, give the columns of the samples it produces.
    """
    require("pyspark", feature="Spark conversion", extra="spark")
    if str(out).startswith("s3:"):
        raise UnsupportedFeatureError(f"dataframe_to_mds writes to a shared path; got {out}")
    out_path = Path(out).absolute()
    if out_path.exists() and any(out_path.iterdir()):
        from streaming.errors import OutputExistsError

        raise OutputExistsError(f"dataframe_to_mds output {out_path} is not empty")
    if columns is None and transform is not None:
        raise EncodeError("with a transform, pass columns= for the samples it produces")
    chosen = columns_from_schema(df.schema) if transform is None else {}
    chosen.update(columns or {})
    final = {name: enc for name, enc in sorted(chosen.items()) if enc is not None}
    out_path.mkdir(parents=True, exist_ok=True)
    args = {"compression": compression, "hashes": hashes, "size_limit": size_limit,
            "max_workers": 1}
    task = _partition_writer(str(out_path), final, transform, args)
    counts = dict(df.rdd.mapPartitionsWithIndex(task).collect())
    parts = [out_path / f"part-{i:05d}" for i in sorted(counts)]
    index = merge_index(out_path, parts)
    return {"out": out_path, "index": index, "parts": len(parts),
            "samples": sum(counts.values()), "columns": final}
