"""Spark DataFrame -> MDS (extra `spark`): one MDSWriter per partition, one merged index.

Each partition writes `out/part-XXXXX/` on its executor: either into a path every executor sees
(local mode or a shared file system) or straight to a remote URL such as `s3://bucket/prefix`
(staged on the executor's disk, uploaded, index last). The driver merges the parts' indexes in
partition order, so the dataset's order is the DataFrame's order, and publishes the root
index.json only after every partition has finished.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from streaming.errors import EncodeError, OutputExistsError, require
from streaming.format.index import merge_index as merge_parts
from streaming.storage import backend_for, join
from streaming.storage.registry import split_scheme
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

    def write(index: int, rows: Iterator[Any]) -> Iterator[tuple[int, int, bytes]]:
        from writers.mds import MDSWriter

        name = f"part-{index:05d}"
        if _is_remote(out):  # staged on the executor's disk, uploaded, local copy removed
            target: Any = join(out, name)
            args = {**writer_args, "exist_ok": True}  # a retried task replaces its own part
        else:
            target = Path(out) / name
            if target.exists():  # a retried task starts over
                shutil.rmtree(target)
            args = writer_args
        coerce, where, count = coercers(columns), f"Spark partition {index}", 0
        with MDSWriter(columns=columns, out=target, **args) as writer:
            for row in rows:
                for sample in samples_from(row.asDict(recursive=True), transform, where):
                    writer.write(apply_coercers(sample, coerce, where))
                    count += 1
        backend, path = backend_for(join(str(target), "index.json"))
        yield index, count, backend.get(path)

    return write


def _is_remote(out: str) -> bool:
    return split_scheme(out)[0] not in ("", "file")


def _publish_remote(out: str, part_indexes: dict[int, bytes]) -> str:
    """Merge the parts' index.json files (already uploaded with their shards) into the root one."""
    with tempfile.TemporaryDirectory(prefix="mds-spark-merge-") as tmp:
        parts = []
        for i in sorted(part_indexes):
            folder = Path(tmp) / f"part-{i:05d}"
            folder.mkdir()
            (folder / "index.json").write_bytes(part_indexes[i])
            parts.append(folder)
        merged = merge_parts(tmp, parts)
        backend, path = backend_for(join(out, "index.json"))
        backend.upload(merged, path)
    return join(out, "index.json")


def _prepare_output(out: str | os.PathLike) -> str:
    """Refuse an output that already holds a dataset; create a local one."""
    text = os.fspath(out)
    if _is_remote(text):
        backend, path = backend_for(join(text, "index.json"))
        if backend.exists(path):
            raise OutputExistsError(f"dataframe_to_mds output {join(text, 'index.json')} exists")
        return text.rstrip("/")
    out_path = Path(backend_for(text)[1]).absolute()
    if out_path.exists() and any(out_path.iterdir()):
        raise OutputExistsError(f"dataframe_to_mds output {out_path} is not empty")
    out_path.mkdir(parents=True, exist_ok=True)
    return str(out_path)


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
) -> dict[str, Any]:
    """Write `df` as MDS under `out` (one sub-dataset per partition); returns counts.

    `columns` defaults to encodings derived from the schema (a None value drops a column);
    with a `transform`, give the columns of the samples it produces. `merge_index=False`
    leaves only the parts' own index.json files (no root index).
    """
    require("pyspark", feature="Spark conversion", extra="spark")
    if columns is None and transform is not None:
        raise EncodeError("with a transform, pass columns= for the samples it produces")
    chosen = columns_from_schema(df.schema) if transform is None else {}
    chosen.update(columns or {})
    final = {name: enc for name, enc in sorted(chosen.items()) if enc is not None}
    target = _prepare_output(out)
    args = {"compression": compression, "hashes": hashes, "size_limit": size_limit,
            "max_workers": 1}
    task = _partition_writer(target, final, transform, args)
    results = df.rdd.mapPartitionsWithIndex(task).collect()
    counts = {index: count for index, count, _ in results}
    if not merge_index:
        index = None
        out_value = target if _is_remote(target) else Path(target)
    elif _is_remote(target):
        index: Any = _publish_remote(target, {i: raw for i, _, raw in results})
        out_value: Any = target
    else:
        out_value = Path(target)
        index = merge_parts(out_value, [out_value / f"part-{i:05d}" for i in sorted(counts)])
    return {"out": out_value, "index": index, "parts": len(counts),
            "samples": sum(counts.values()), "columns": final}
