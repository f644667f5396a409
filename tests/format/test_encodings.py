"""Round trips and byte layouts of every column encoding, plus their refusal of bad values."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streaming.errors import EncodeError, UnknownEncodingError
from streaming.format import encoding_size, get_encoding, is_known_encoding
from streaming.format.encodings.ndarray import DTYPE_CODES
from streaming.format.encodings.scalars import SCALAR_NAMES

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
DTYPES = sorted(DTYPE_CODES)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=12,
)


def roundtrip(name, value):
    encoding = get_encoding(name)
    data = encoding.encode(value)
    if encoding.size is not None:
        assert len(data) == encoding.size
    return encoding.decode(memoryview(data))


@given(INT64)
def test_int_roundtrips_to_python_int(value):
    got = roundtrip("int", value)
    assert type(got) is int and got == value


@pytest.mark.parametrize("value", [-(1 << 63) - 1, 1 << 63, True, 1.0, "1"])
def test_int_refuses_out_of_range_or_non_integers(value):
    with pytest.raises(EncodeError, match="int"):
        get_encoding("int").encode(value)


@pytest.mark.parametrize("name", SCALAR_NAMES)
@given(data=st.data())
def test_numpy_scalars_roundtrip_bit_exact(name, data):
    dtype = np.dtype(name)
    value = data.draw(hnp.from_dtype(dtype))
    got = roundtrip(name, value)
    assert isinstance(got, np.generic) and got.dtype == dtype
    assert got.tobytes() == np.asarray(value, dtype).tobytes()


@pytest.mark.parametrize("name", [n for n in SCALAR_NAMES if n[0] in "iu"])
def test_integer_scalars_accept_extremes_and_refuse_beyond(name):
    info = np.iinfo(name)
    for value in (int(info.min), int(info.max)):
        assert int(roundtrip(name, value)) == value
    for value in (int(info.min) - 1, int(info.max) + 1):
        with pytest.raises(EncodeError, match=name):
            get_encoding(name).encode(value)


@given(st.binary())
def test_bytes_roundtrip(value):
    got = roundtrip("bytes", value)
    assert type(got) is bytes and got == value


@given(st.text())
def test_str_roundtrip_unicode_and_empty(value):
    got = roundtrip("str", value)
    assert type(got) is str and got == value


def test_str_refuses_lone_surrogates():
    with pytest.raises(EncodeError, match="UTF-8"):
        get_encoding("str").encode("\ud800")


@given(st.integers())
def test_str_int_roundtrip(value):
    assert roundtrip("str_int", value) == value


@given(st.floats(allow_nan=False))
def test_str_float_roundtrip(value):
    got = roundtrip("str_float", value)
    assert type(got) is float and got == value


def test_str_float_nan():
    assert math.isnan(roundtrip("str_float", float("nan")))


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_str_decimal_roundtrip_keeps_digits(value):
    got = roundtrip("str_decimal", value)
    assert type(got) is Decimal and str(got) == str(value)


@given(JSON)
def test_json_roundtrip(value):
    assert roundtrip("json", value) == json.loads(json.dumps(value))


def test_json_refuses_unserialisable():
    with pytest.raises(EncodeError, match="json"):
        get_encoding("json").encode({"x": object()})


@given(st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
))
def test_ndarray_dynamic_roundtrip(array):
    for name in ("ndarray", f"ndarray:{array.dtype.name}"):
        got = roundtrip(name, array)
        assert got.dtype == array.dtype and got.shape == array.shape
        assert got.tobytes() == array.tobytes()
    fixed = f"ndarray:{array.dtype.name}:{','.join(map(str, array.shape))}"
    assert encoding_size(fixed) == array.nbytes
    assert roundtrip(fixed, array).tobytes() == array.tobytes()


@pytest.mark.parametrize(
    ("side", "width"), [(255, 1), (256, 2), (65535, 2), (65536, 4)]
)
def test_ndarray_shape_width_edges(side, width):
    array = np.arange(side, dtype=np.uint8).reshape(side, 1)
    data = get_encoding("ndarray:uint8").encode(array)
    header = 1 + 2 * width
    assert data[0] == (2 << 2) | {1: 0, 2: 1, 4: 2}[width]
    assert len(data) == header + array.nbytes
    assert np.array_equal(get_encoding("ndarray:uint8").decode(data), array)


def test_ndarray_known_example_bytes():
    data = get_encoding("ndarray:int16").encode(np.array([0, 1, 2], np.int16))
    assert data == bytes.fromhex("04 03 00 00 01 00 02 00")
    dynamic = get_encoding("ndarray").encode(np.array([0, 1, 2], np.int16))
    assert dynamic == bytes([17]) + data


def test_ndarray_decode_is_zero_copy():
    raw = bytearray(get_encoding("ndarray:int32").encode(np.arange(6, dtype=np.int32)))
    got = get_encoding("ndarray:int32").decode(memoryview(raw))
    raw[-4:] = (99).to_bytes(4, "little")
    assert got[-1] == 99


def test_ndarray_accepts_non_contiguous_and_big_endian():
    array = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    assert np.array_equal(roundtrip("ndarray", array), array)
    big = np.arange(4, dtype=">u2")
    assert np.array_equal(roundtrip("ndarray", big), big)


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("ndarray", np.zeros(0, np.int32), "empty"),
        ("ndarray", np.array(3, np.int32), "0-d"),
        ("ndarray", np.zeros(2, np.bool_), "dtype"),
        ("ndarray", [1, 2], "numpy"),
        ("ndarray:int32", np.zeros(2, np.int64), "dtype"),
        ("ndarray:int32:2,2", np.zeros((2, 3), np.int32), "shape"),
    ],
)
def test_ndarray_refuses_bad_arrays(name, value, why):
    with pytest.raises(EncodeError, match=why):
        get_encoding(name).encode(value)


@pytest.mark.parametrize(
    "name",
    ["nope", "ndarray:bool", "ndarray:int32:0", "ndarray:int32:a,b", "ndarray:int32:2:3", "",
     "list[str]", "NDARRAY"],
)
def test_unknown_encodings(name):
    assert not is_known_encoding(name)
    with pytest.raises(UnknownEncodingError, match=re.escape(repr(name))):
        get_encoding(name)


def test_known_encodings_and_sizes():
    sizes = {"int": 8, "uint8": 1, "float16": 2, "float64": 8, "str": None, "pkl": None,
             "ndarray:float32:2,3": 24, "jpegarray": None, "list[png]": None}
    for name, size in sizes.items():
        assert is_known_encoding(name)
        assert encoding_size(name) == size


@given(st.lists(st.integers(), max_size=3), st.text(max_size=5))
def test_pickle_roundtrip(items, text):
    value = {"items": items, "text": text, "t": (1, 2)}
    assert roundtrip("pkl", value) == value
    assert get_encoding("pkl").unsafe
