"""`dataframe_to_mds` with the reference implementation's calling convention:
`dataframe_to_mds(df, merge_index=True, mds_kwargs={"out": ..., "columns": ...},
udf_iterable=None, udf_kwargs=None)`, returning `(local, remote)`. It maps the arguments onto
`writers.convert.spark.dataframe_to_mds`, which does the work."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streaming.errors import ArgumentError
from streaming.storage.schemes import split_scheme
from writers.convert import spark

_WRITER_ARGS = ("compression", "hashes", "size_limit")
_IGNORED = ("keep_local", "progress_bar", "max_workers", "exist_ok", "retry")


def _split_out(out: Any) -> tuple[str, str]:
    """`out` as the reference reports it: (local folder or '', remote URL or '')."""
    if isinstance(out, (tuple, list)):
        local, remote = out
        return os.fspath(local or ""), os.fspath(remote or "")
    text = os.fspath(out)
    if split_scheme(text)[0] in ("", "file"):
        return text, ""
    return "", text


def _per_row(udf: Callable, udf_kwargs: Mapping[str, Any]) -> Callable[[dict], Iterable[dict]]:
    """The reference hands `udf_iterable` a pandas DataFrame per batch; here it gets a one-row
    DataFrame per row, which gives the same samples for row-wise functions."""
    import pandas as pd

    def transform(row: dict) -> Iterable[dict]:
        return udf(pd.DataFrame([row]), **udf_kwargs)

    return transform


def dataframe_to_mds(dataframe: Any, merge_index: bool = True,
                     mds_kwargs: Mapping[str, Any] | None = None,
                     udf_iterable: Callable | None = None,
                     udf_kwargs: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """Convert a Spark DataFrame to MDS; `mds_kwargs` holds MDSWriter's arguments (`out`
    required, `columns` inferred from the schema when absent, `compression` defaults to zstd)."""
    kwargs = dict(mds_kwargs or {})
    if "out" not in kwargs:
        raise ArgumentError("dataframe_to_mds: `out` (and `columns`) go in mds_kwargs")
    out = kwargs.pop("out")
    columns = kwargs.pop("columns", None)
    if udf_iterable is not None and columns is None:
        raise ArgumentError("dataframe_to_mds: with udf_iterable, give mds_kwargs['columns'] "
                            "for the samples it produces")
    for name in _IGNORED:
        kwargs.pop(name, None)
    unknown = sorted(set(kwargs) - set(_WRITER_ARGS))
    if unknown:
        raise ArgumentError(f"dataframe_to_mds: unknown mds_kwargs {unknown}")
    kwargs.setdefault("compression", "zstd")
    local, remote = _split_out(out)
    transform = None if udf_iterable is None else _per_row(udf_iterable, udf_kwargs or {})
    spark.dataframe_to_mds(dataframe, remote or local, columns, transform=transform,
                           merge_index=merge_index, **kwargs)
    return local, remote
