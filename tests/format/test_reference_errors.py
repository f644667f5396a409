"""Our typed errors are also what the reference implementation raises for the same mistake,
so `except` clauses written against it keep working."""

from __future__ import annotations

import json
import pickle

import pytest

from streaming import LocalDataset, StreamingDataset
from streaming.errors import (
    EncodeError,
    IndexFileError,
    IndexJSONError,
    IndexNotFoundError,
    OutputExistsError,
    PlanError,
    StreamingError,
    UnknownEncodingError,
    UnsafeTypeError,
)
from streaming.format.index import read_index
from writers.mds import MDSWriter


def _dataset(path, columns=None, samples=3):
    with MDSWriter(out=str(path), columns=columns or {"a": "int"}) as writer:
        for i in range(samples):
            writer.write({"a": i})
    return path


@pytest.mark.parametrize("text", ["", "{\"shards\": [", "not json"])
def test_malformed_index_is_a_json_decode_error(tmp_path, text):
    (tmp_path / "index.json").write_text(text)
    with pytest.raises(json.JSONDecodeError) as info:
        read_index(tmp_path)
    assert isinstance(info.value, IndexFileError) and isinstance(info.value, IndexJSONError)
    assert str(tmp_path / "index.json") in str(info.value)
    again = pickle.loads(pickle.dumps(info.value))  # crosses process boundaries intact
    assert type(again) is IndexJSONError and str(again) == str(info.value)


def test_malformed_index_from_the_dataset(tmp_path):
    (tmp_path / "index.json").write_text("{")
    with pytest.raises(json.JSONDecodeError):
        StreamingDataset(local=str(tmp_path))


def test_missing_local_index_is_runtime_and_file_not_found(tmp_path):
    with pytest.raises(RuntimeError) as info:
        StreamingDataset(local=str(tmp_path / "nowhere"))
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, IndexNotFoundError)


def test_unknown_encoding_in_writer_is_a_type_error(tmp_path):
    with pytest.raises(TypeError) as info:
        MDSWriter(out=str(tmp_path / "ds"), columns={"a": "complex128"})
    assert isinstance(info.value, UnknownEncodingError)


def test_wrong_value_type_is_an_attribute_error(tmp_path):
    with MDSWriter(out=str(tmp_path / "ds"), columns={"a": "str"}) as writer:
        with pytest.raises(AttributeError) as info:
            writer.write({"a": 5})
        assert isinstance(info.value, (EncodeError, TypeError))
        writer.write({"a": "ok"})


def test_missing_column_is_a_key_error(tmp_path):
    with MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int", "b": "str"}) as writer:
        with pytest.raises(KeyError) as info:
            writer.write({"a": 1})
        assert isinstance(info.value, EncodeError) and "'b'" in str(info.value)
        writer.write({"a": 1, "b": "x"})


def test_unsafe_column_is_a_value_error(tmp_path):
    with MDSWriter(out=str(tmp_path / "ds"), columns={"p": "pkl"}) as writer:
        writer.write({"p": {"x": 1}})
    with pytest.raises(ValueError) as info:
        LocalDataset(tmp_path / "ds")
    assert isinstance(info.value, UnsafeTypeError)


def test_non_empty_output_is_file_exists(tmp_path):
    _dataset(tmp_path / "ds")
    with pytest.raises(FileExistsError) as info:
        MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int"})
    assert isinstance(info.value, OutputExistsError)


def test_bad_stream_weights_are_value_errors(tmp_path):
    from streaming import Stream

    with pytest.raises(ValueError) as info:
        Stream(local=str(tmp_path), proportion=0.5, repeat=2)
    assert isinstance(info.value, PlanError) and isinstance(info.value, StreamingError)


def test_missing_shard_is_runtime_and_file_not_found(tmp_path):
    from streaming.errors import ObjectNotFoundError

    _dataset(tmp_path / "ds", samples=5)
    (tmp_path / "ds" / "shard.00000.mds").unlink()
    # Data read in place is checked when the dataset is built (the reference fails at get_item);
    # the error is of the type the reference raises there.
    with pytest.raises(RuntimeError) as info:
        StreamingDataset(local=str(tmp_path / "ds"))
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, ObjectNotFoundError)
    assert "shard.00000.mds" in str(info.value)
