"""Ray Dataset -> MDS (extra `ray`): an MDS Datasink, one MDSWriter per write task.

Each write task writes `out/part-NNNNN/` (numbered by Ray's task index, so a task Ray retries
rewrites its own part); `on_write_complete`, which Ray calls once on the driver after every
write task succeeded, publishes the merged index (writers/convert/parts.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from streaming.errors import EncodeError, require
from writers.convert.arrow_rows import arrow_records
from writers.convert.infer import apply_coercers, coercers
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
    import ray.data


def _datasink_base() -> type:
    require("ray.data", feature="Ray Data conversion", extra="ray", package="ray[data]")
    from ray.data.datasource import Datasink

    return Datasink


def mds_datasink(target: PartsTarget, columns: dict[str, str], transform: Transform | None,
                 writer_args: Mapping[str, Any]) -> Any:
    """A Ray `Datasink` writing MDS parts into `target`; after `ds.write_datasink(sink)`,
    `sink.index` is the published index and `sink.results` the parts written."""

    class MDSDatasink(_datasink_base()):  # Ray's extension point is subclassing Datasink
        index: str | None = None
        results: list[PartResult] = []

        def get_name(self) -> str:
            return "MDS"

        def write(self, blocks: Iterable[Any], ctx: Any) -> PartResult:
            where = f"Ray write task {ctx.task_idx}"
            return write_part(target, ctx.task_idx, columns,
                              _samples(blocks, columns, transform, where), writer_args)

        def on_write_complete(self, write_result: Any) -> None:
            self.results = list(write_result.write_returns)
            self.index = publish_parts(target, self.results)

    return MDSDatasink()


def _samples(blocks: Iterable[Any], columns: dict[str, str], transform: Transform | None,
             where: str) -> Iterator[dict]:
    from ray.data.block import BlockAccessor

    coerce = coercers(columns)
    for block in blocks:
        for record in arrow_records(BlockAccessor.for_block(block).to_arrow()):
            for sample in samples_from(record, transform, where):
                yield apply_coercers(sample, coerce, where)


def _columns(ds: ray.data.Dataset, columns: Mapping[str, str | None] | None,
             transform: Transform | None) -> dict[str, str]:
    if columns is None and transform is not None:
        raise EncodeError("with a transform, pass columns= for the samples it produces")
    chosen: dict[str, str | None] = {}
    if transform is None:
        schema = ds.schema()
        arrow = getattr(schema, "base_schema", schema)
        chosen.update(columns_from_arrow(arrow))
        missing = [n for n in arrow.names if n not in chosen and n not in (columns or {})]
        if missing:
            raise EncodeError(f"Ray Dataset columns {missing} have no obvious MDS encoding; "
                              "pass columns={name: '<encoding>'}")
    chosen.update(columns or {})
    return {name: enc for name, enc in sorted(chosen.items()) if enc is not None}


def ray_to_mds(
    ds: ray.data.Dataset,
    out: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    *,
    compression: str | None = "zstd",
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    transform: Transform | None = None,
    ordered: bool = True,
    mode: str = "create",
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Write the Ray Dataset `ds` as MDS under `out` (a path every worker sees, or a URL).

    Args:
        ds: a `ray.data.Dataset`.
        out: the dataset folder or remote URL.
        columns: encodings; by default derived from the schema (a None value drops a column).
        compression, hashes, size_limit: as for MDSWriter.
        transform: record -> None, a sample or samples (then `columns` is required).
        ordered: keep the Dataset's block order (Ray's preserve_order), so the output is the
            same for a given input and block layout.
        mode: "create", "append" or "overwrite".
        concurrency: most write tasks at once (Ray's default when None).

    Returns:
        {"out", "index", "parts", "samples", "columns"}.
    """
    _datasink_base()
    final = _columns(ds, columns, transform)
    target = prepare_target(out, mode, "ray_to_mds")
    check_columns(target, final, compression)
    args = {"compression": compression, "hashes": hashes, "size_limit": size_limit,
            "max_workers": 1}
    sink = mds_datasink(target, final, transform, args)
    options = ds.context.execution_options
    before = options.preserve_order
    options.preserve_order = before or ordered
    try:
        ds.write_datasink(sink, concurrency=concurrency)
    finally:
        options.preserve_order = before
    return {"out": target.location, "index": sink.index, "parts": len(sink.results),
            "samples": sum(r.samples for r in sink.results), "columns": final}
