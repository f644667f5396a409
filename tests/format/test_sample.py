"""SampleCodec: byte-exact re-encoding of reference samples, decode_column, schema errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import EncodeError, FormatError, UnknownEncodingError, UnsafeTypeError
from streaming.format import SampleCodec, ShardReader, read_index
from tests.format.helpers import raw_shard_paths


@pytest.mark.parametrize("name", ["all_encodings", "llm_raw", "oversize", "images"])
def test_reencoding_reference_samples_gives_identical_bytes(reference_fixtures, tmp_path, name):
    index = read_index(reference_fixtures / name)
    codec = index.codec()
    checked = 0
    for path in raw_shard_paths(index, tmp_path):
        with ShardReader(path, codec) as shard:
            for i in range(len(shard)):
                sample = shard.get(i)
                if name == "images":  # jpeg re-encoding is lossy; pil and int are exact
                    sample = {**sample, "jpeg": None, "png": None, "jarr": None}
                    partial = SampleCodec(["label", "pil"], ["int", "pil"])
                    raw = shard.sample_bytes(i)
                    assert partial.encode(sample)[4:] == _columns_bytes(codec, raw, "label", "pil")
                else:
                    assert codec.encode(sample) == bytes(shard.sample_bytes(i))
                checked += 1
    assert checked == index.num_samples


def _columns_bytes(codec: SampleCodec, raw: memoryview, *names: str) -> bytes:
    return b"".join(bytes(raw[slice(*codec.column_span(raw, n))]) for n in names)


def test_decode_column_matches_full_decode(reference_fixtures):
    index = read_index(reference_fixtures / "all_encodings")
    codec = index.codec()
    with ShardReader(index.raw_path(1), codec) as shard:
        for i in (0, len(shard) - 1):
            full = shard.get(i)
            for column in codec.column_names:
                one = shard.get_column(i, column)
                if isinstance(one, np.ndarray):
                    assert np.array_equal(one, full[column])
                else:
                    assert one == full[column]


def test_from_columns_sorts_names_and_layout_is_lengths_then_payloads():
    codec = SampleCodec.from_columns({"z": "int", "a": "str", "m": "bytes"})
    assert codec.column_names == ["a", "m", "z"]
    assert codec.column_sizes == [None, None, 8]
    data = codec.encode({"a": "hé", "m": b"", "z": 5})
    assert data == (3).to_bytes(4, "little") + (0).to_bytes(4, "little") + "hé".encode() \
        + (5).to_bytes(8, "little")
    assert codec.decode(data) == {"a": "hé", "m": b"", "z": 5}


@given(st.text(), st.binary(), st.integers(-(1 << 63), (1 << 63) - 1), st.floats(allow_nan=False))
def test_mixed_codec_roundtrip(text, blob, number, real):
    codec = SampleCodec.from_columns({"t": "str", "b": "bytes", "n": "int", "f": "float64"})
    sample = {"t": text, "b": blob, "n": number, "f": real}
    got = codec.decode(codec.encode(sample))
    assert got == sample
    assert codec.decode_column(codec.encode(sample), "t") == text


def test_fixed_size_codec():
    codec = SampleCodec.from_columns({"x": "uint16", "y": "ndarray:uint8:3"})
    assert codec.fixed_size == 5
    data = codec.encode({"x": 7, "y": np.array([1, 2, 3], np.uint8)})
    assert data == bytes([7, 0, 1, 2, 3])


def test_encode_errors_name_the_column():
    codec = SampleCodec.from_columns({"a": "int", "b": "str"})
    with pytest.raises(EncodeError, match="'b'"):
        codec.encode({"a": 1})
    with pytest.raises(EncodeError, match="column 'a'"):
        codec.encode({"a": "x", "b": "y"})


def test_schema_errors():
    with pytest.raises(UnknownEncodingError, match="'nope'"):
        SampleCodec(["a"], ["nope"])
    with pytest.raises(FormatError, match="duplicate"):
        SampleCodec(["a", "a"], ["int", "int"])
    with pytest.raises(FormatError, match="sizes"):
        SampleCodec(["a"], ["int"], [4])
    with pytest.raises(FormatError, match="names"):
        SampleCodec(["a", "b"], ["int"])
    with pytest.raises(UnsafeTypeError, match="'obj'"):
        SampleCodec(["obj"], ["pkl"])
    assert SampleCodec(["obj"], ["pkl"], allow_unsafe_types=True).decode(
        SampleCodec(["obj"], ["pkl"], allow_unsafe_types=True).encode({"obj": {1: 2}})
    ) == {"obj": {1: 2}}


def test_decode_rejects_wrong_length():
    codec = SampleCodec.from_columns({"a": "int", "b": "str"})
    data = codec.encode({"a": 1, "b": "xyz"})
    with pytest.raises(ValueError, match="bytes"):
        codec.decode(data + b"!")


def test_codec_pickles():
    codec = SampleCodec.from_columns({"a": "int", "b": "pkl"}, allow_unsafe_types=True)
    clone = pickle.loads(pickle.dumps(codec))
    assert clone == codec and clone.allow_unsafe_types
    assert clone.decode(codec.encode({"a": 1, "b": [1]})) == {"a": 1, "b": [1]}


@given(st.lists(st.tuples(st.text(max_size=20), st.binary(max_size=300), st.integers(0, 99)),
                min_size=1, max_size=12))
def test_decode_columns_with_views_gives_the_same_values(rows):
    from streaming.format.encodings.encoding import FileBytes

    codec = SampleCodec.from_columns({"t": "str", "b": "bytes", "n": "int"})
    encoded = [codec.encode({"t": t, "b": b, "n": n}) for t, b, n in rows]
    ends = np.cumsum([len(e) for e in encoded]).astype(np.int64)
    starts = ends - [len(e) for e in encoded]
    buffer = bytearray(b"".join(encoded))
    copies = codec.decode_columns(FileBytes(buffer), starts, ends)
    views = codec.decode_columns(FileBytes(buffer), starts, ends, views=True)
    names = codec.column_names
    want = {"t": [t for t, _, _ in rows], "b": [b for _, b, _ in rows], "n": [n for *_, n in rows]}
    assert {name: list(c) for name, c in zip(names, copies)} == want
    for name, copied, viewed in zip(names, copies, views):
        if name == "b":  # bytes: zero-copy views of the read buffer, same contents
            assert all(type(v) is memoryview for v in viewed)
            assert [bytes(v) for v in viewed] == list(copied) == [b for _, b, _ in rows]
        else:  # other families decode as usual
            assert list(viewed) == list(copied)
    del buffer
    assert [bytes(v) for v in views[names.index("b")]] == [b for _, b, _ in rows]  # kept alive
