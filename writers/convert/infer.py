"""Infer MDS column encodings from sample values, and coerce values to the chosen encodings.

Inference only decides where one answer is obvious (str, int, float, bytes, numeric lists,
dicts); anything else raises an EncodeError that asks for an explicit `columns=` entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from streaming.errors import EncodeError

_INT64 = (-(1 << 63), (1 << 63) - 1)
_NDARRAY_DTYPES = {
    "uint8", "int8", "uint16", "int16", "float16", "uint32", "int32", "float32",
    "uint64", "int64", "float64",
}
_NUMPY_SCALARS = _NDARRAY_DTYPES
_INT_ENCODINGS = {"int", "str_int"} | {f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}
_FLOAT_ENCODINGS = {"float16", "float32", "float64", "str_float"}


def _kind(value: Any) -> str:
    """The inferred encoding of one value, or a '?...' marker describing why it is ambiguous."""
    if value is None:
        return "?null"
    if isinstance(value, bool):
        return "json"
    if isinstance(value, int):
        return "int" if _INT64[0] <= value <= _INT64[1] else "str_int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(value, np.ndarray):
        name = value.dtype.name
        return f"ndarray:{name}" if name in _NDARRAY_DTYPES else f"?ndarray of {name}"
    if isinstance(value, np.generic):
        name = value.dtype.name
        if name == "bool":
            return "json"
        return name if name in _NUMPY_SCALARS else f"?numpy {name}"
    if isinstance(value, dict):
        return "json"
    if isinstance(value, (list, tuple)):
        return _list_kind(value)
    return f"?{type(value).__name__}"


def _list_kind(values: list | tuple) -> str:
    """Lists of numbers (possibly nested, rectangular) become ndarrays; anything else json."""
    if not values:
        return "?empty list"
    try:
        arr = np.asarray(values)
    except ValueError:  # ragged nesting
        return "json"
    if arr.dtype.kind in "iu" and arr.dtype != np.bool_:
        return "ndarray:int64"
    if arr.dtype.kind == "f":
        return "ndarray:float64"
    return "json"


def _merge(column: str, seen: set[str]) -> str:
    """One encoding for a column from the kinds of its sampled values, or EncodeError."""
    if seen <= {"?empty list"}:
        raise EncodeError(
            f"column {column!r}: only empty lists were seen, so the element type is unknown; "
            f"pass columns={{{column!r}: 'ndarray:int64'}} (or another encoding)"
        )
    seen = seen - {"?empty list"}
    if seen == {"int", "float64"}:
        return "float64"
    if seen == {"ndarray:int64", "ndarray:float64"}:
        return "ndarray:float64"
    if len(seen) == 1:
        (only,) = seen
        if not only.startswith("?"):
            return only
    if "?null" in seen:
        why = "has null values (MDS columns are not nullable; use 'json' or drop them)"
    else:
        kinds = ", ".join(sorted(k.lstrip("?") for k in seen))
        why = f"holds values of several or unsupported kinds ({kinds})"
    raise EncodeError(
        f"cannot infer an encoding for column {column!r}: it {why}; "
        f"pass columns={{{column!r}: '<encoding>'}} to choose one"
    )


def infer_columns(
    samples: Iterable[Mapping[str, Any]], overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Column name -> encoding for these samples; `overrides` wins for the columns it names."""
    overrides = dict(overrides or {})
    kinds: dict[str, set[str]] = {}
    count = 0
    for sample in samples:
        count += 1
        for key, value in sample.items():
            if key not in overrides:
                kinds.setdefault(key, set()).add(_kind(value))
    if not count and not overrides:
        raise EncodeError("cannot infer columns from an empty input; pass columns= explicitly")
    columns = {name: _merge(name, seen) for name, seen in kinds.items()}
    columns.update(overrides)
    return dict(sorted(columns.items()))


def _from_text(encoding: str) -> Callable[[str], Any] | None:
    """Parser turning CSV text into a value for a scalar `encoding` (None: keep the string)."""
    if encoding in _INT_ENCODINGS:
        return int
    if encoding in _FLOAT_ENCODINGS:
        return float
    if encoding == "json":
        return json.loads
    if encoding == "bytes":
        return str.encode
    if encoding == "str_decimal":
        import decimal

        return decimal.Decimal
    return None


def _exact_ints(arr: np.ndarray, target: np.dtype) -> np.ndarray:
    """Integers in another integer dtype (int64 lists into uint16 token ids), or ValueError
    naming a value that does not fit: never a silent wrap-around."""
    info = np.iinfo(target)
    low, high = int(arr.min()), int(arr.max())
    if low < info.min or high > info.max:
        bad = low if low < info.min else high
        raise ValueError(f"{bad} does not fit {target.name} ({info.min}..{info.max})")
    return arr.astype(target)


def _to_array(dtype: str, from_text: bool) -> Callable[[Any], Any]:
    target = np.dtype(dtype)

    def convert(value: Any) -> Any:
        if from_text and isinstance(value, str):
            value = json.loads(value)
        arr = np.asarray(value)
        if arr.size == 0:
            raise EncodeError("an empty list cannot be stored in an ndarray column (MDS arrays "
                              "hold at least one element); drop such records in transform= or "
                              "use the 'json' encoding for this column")
        if arr.dtype == target:
            return arr
        if arr.dtype.kind in "iu" and target.kind in "iu":
            return _exact_ints(arr, target)
        # same_kind refuses float -> int, so a stray 1.5 in a token list is an error, not a 1.
        return arr.astype(target, casting="same_kind")

    return convert


def _only_text(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        return parse(value) if isinstance(value, str) else value

    return convert


def coercers(columns: Mapping[str, str], *, from_text: bool = False) -> dict[str, Callable]:
    """Per-column functions that turn convertible values (lists, CSV text) into encodable ones."""
    result: dict[str, Callable] = {}
    for name, encoding in columns.items():
        parse = _from_text(encoding) if from_text else None
        if encoding.startswith("ndarray:"):
            result[name] = _to_array(encoding.split(":")[1], from_text)
        elif parse is not None:
            result[name] = _only_text(parse)
    return result


def apply_coercers(sample: dict, funcs: Mapping[str, Callable], where: str) -> dict:
    """Coerce the sample's values in place; a value that cannot be converted names its column."""
    for name, func in funcs.items():
        if name in sample:
            try:
                sample[name] = func(sample[name])
            except (TypeError, ValueError) as exc:
                prefix = f"{where}: " if where else ""
                raise EncodeError(
                    f"{prefix}column {name!r}: cannot convert {sample[name]!r:.80} ({exc})"
                ) from exc
    return sample
