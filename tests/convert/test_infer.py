"""Column inference picks the obvious encoding and refuses to guess otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import EncodeError
from writers.convert.infer import apply_coercers, coercers, infer_columns


def test_obvious_kinds():
    samples = [
        {"s": "a", "i": 1, "f": 0.5, "b": b"x", "t": [1, 2], "v": [0.5, 1], "d": {"k": 1},
         "flag": True, "big": 1 << 70, "arr": np.zeros(3, np.int32), "u": np.uint16(3),
         "words": ["a", "b"], "grid": [[1, 2], [3, 4]]},
    ]
    assert infer_columns(samples) == {
        "arr": "ndarray:int32", "b": "bytes", "big": "str_int", "d": "json", "f": "float64",
        "flag": "json", "grid": "ndarray:int64", "i": "int", "s": "str", "t": "ndarray:int64",
        "u": "uint16", "v": "ndarray:float64", "words": "json",
    }


def test_numbers_promote_to_float():
    assert infer_columns([{"x": 1}, {"x": 2.5}]) == {"x": "float64"}
    assert infer_columns([{"x": [1]}, {"x": [2.5]}]) == {"x": "ndarray:float64"}


@pytest.mark.parametrize(
    ("values", "words"),
    [([1, "a"], "several"), ([None, "a"], "null"), ([[]], "empty lists"), ([object()], "object")],
)
def test_ambiguous_columns_ask_for_columns(values, words):
    with pytest.raises(EncodeError, match=r"'x'.*") as info:
        infer_columns([{"x": v} for v in values])
    assert words in str(info.value)
    assert "columns=" in str(info.value)


def test_overrides_win_and_empty_input_needs_columns():
    assert infer_columns([{"x": 1, "y": "a"}], {"x": "int32"}) == {"x": "int32", "y": "str"}
    assert infer_columns([], {"x": "int"}) == {"x": "int"}
    with pytest.raises(EncodeError, match="empty input"):
        infer_columns([])


def test_array_coercion_refuses_silent_truncation():
    funcs = coercers({"t": "ndarray:int32", "s": "str"})
    assert set(funcs) == {"t"}
    sample = apply_coercers({"t": [1, 2], "s": "x"}, funcs, "here")
    assert sample["t"].dtype == np.int32 and sample["t"].tolist() == [1, 2]
    with pytest.raises(EncodeError, match=r"here: column 't'"):
        apply_coercers({"t": [1.5]}, funcs, "here")


def test_text_coercion_for_csv_values():
    funcs = coercers({"i": "int", "f": "float32", "j": "json", "a": "ndarray:int16", "s": "str"},
                     from_text=True)
    sample = apply_coercers({"i": "7", "f": "1.5", "j": '{"a": 1}', "a": "[1, 2]", "s": "7"},
                            funcs, "x.csv")
    assert sample["i"] == 7 and sample["f"] == 1.5 and sample["j"] == {"a": 1}
    assert sample["a"].dtype == np.int16 and sample["s"] == "7"
    with pytest.raises(EncodeError, match=r"x.csv: column 'i'"):
        apply_coercers({"i": "seven"}, funcs, "x.csv")


@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=1, max_size=20))
def test_int_lists_are_int64_arrays(values):
    assert infer_columns([{"t": values}]) == {"t": "ndarray:int64"}
    assert infer_columns([{"n": v} for v in values]) == {"n": "int"}
