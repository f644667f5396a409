"""The writer's fast encoder gives exactly SampleCodec.encode's bytes, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streaming.errors import EncodeError
from streaming.format.sample import SampleCodec
from writers.fast_encode import column_encoder, sample_encoder

COLUMNS = {
    "id": "int",
    "text": "str",
    "blob": "bytes",
    "tokens": "ndarray:uint16",
    "grid": "ndarray:float32:2,3",
}
CODEC = SampleCodec.from_columns(COLUMNS)
FAST = sample_encoder(CODEC)

values = {
    "id": st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(1 << 63, 1 << 70)),
    "text": st.text(),
    "blob": st.binary(max_size=300),
    "tokens": hnp.arrays(
        st.sampled_from([np.uint16, np.dtype(">u2"), np.int32]),
        hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=300),
    ),
    "grid": hnp.arrays(
        st.sampled_from([np.float32, np.float64]), st.sampled_from([(2, 3), (3, 2), (6,)])
    ),
}


def _assert_same_encoding(sample: dict) -> None:
    try:
        expected = CODEC.encode(sample)
    except EncodeError as exc:
        with pytest.raises(EncodeError, match=str(exc)[:20]):
            FAST(sample)
    else:
        assert FAST(sample) == expected


@given(st.fixed_dictionaries(values))
def test_fast_path_matches_the_codec(sample: dict):
    _assert_same_encoding(sample)


@given(
    tokens=hnp.arrays(np.uint16, st.integers(1, 70_000)),
    step=st.sampled_from([1, 2]),
)
def test_long_and_strided_arrays(tokens: np.ndarray, step: int):
    grid = np.arange(6, dtype=np.float32).reshape(2, 3)
    _assert_same_encoding({"id": 1, "text": "t", "blob": b"b", "tokens": tokens[::step],
                           "grid": grid})


def test_odd_values_fall_back_to_the_codec_errors():
    good = {"id": 1, "text": "a", "blob": b"", "tokens": np.ones(3, np.uint16),
            "grid": np.zeros((2, 3), np.float32)}
    _assert_same_encoding(good)
    for key, bad in [("id", True), ("id", 1.0), ("text", "\ud800"), ("blob", bytearray(b"x")),
                     ("tokens", np.ones(0, np.uint16)), ("tokens", [1, 2])]:
        _assert_same_encoding({**good, key: bad})
    _assert_same_encoding({k: v for k, v in good.items() if k != "text"})


def test_columns_without_fast_path_use_the_codec():
    codec = SampleCodec.from_columns({"j": "json", "i": "int"})
    assert column_encoder("json") is None and column_encoder("ndarray") is None
    assert sample_encoder(codec) == codec.encode
