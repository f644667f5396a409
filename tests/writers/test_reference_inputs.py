"""Writer inputs the reference implementation accepts and the limits it enforces."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest

from streaming import LocalDataset
from streaming.errors import ArgumentError, SizeLimitError
from streaming.format.encodings import get_encoding
from writers.mds import MDSWriter

PIL = pytest.importorskip("PIL.Image")


def _jpeg_bytes(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    PIL.new("RGB", (8, 6), color).save(out, format="JPEG")
    return out.getvalue()


def test_jpeg_columns_take_encoded_bytes(tmp_path):
    red, blue = _jpeg_bytes((255, 0, 0)), _jpeg_bytes((0, 0, 255))
    columns = {"one": "jpeg", "many": "jpeg_array", "png": "png"}
    png = io.BytesIO()
    PIL.new("L", (3, 2), 7).save(png, format="PNG")
    with MDSWriter(out=str(tmp_path / "ds"), columns=columns) as writer:
        writer.write({"one": red, "many": [red, bytearray(blue)], "png": png.getvalue()})
        writer.write({"one": PIL.open(io.BytesIO(blue)), "many": [PIL.new("RGB", (2, 2))],
                      "png": PIL.new("L", (3, 2), 7)})
    ds = LocalDataset(tmp_path / "ds")
    first = ds[0]
    assert first["one"].size == (8, 6) and first["one"].format == "JPEG"
    assert [im.size for im in first["many"]] == [(8, 6), (8, 6)]
    assert first["png"].tobytes() == ds[1]["png"].tobytes()
    # stored byte for byte, as the reference does with bytes values
    assert get_encoding("jpeg").encode(red) == red


def test_json_column_takes_numpy_scalars_and_arrays(tmp_path):
    value = {"n": np.int64(3), "f": np.float32(0.5), "a": np.arange(3, dtype=np.uint8),
             "m": [np.bool_(True), np.float64(1.25)]}
    with MDSWriter(out=str(tmp_path / "ds"), columns={"j": "json", "top": "json"}) as writer:
        writer.write({"j": value, "top": np.array([[1, 2], [3, 4]])})
    sample = LocalDataset(tmp_path / "ds")[0]
    assert sample["j"] == {"n": 3, "f": 0.5, "a": [0, 1, 2], "m": [True, 1.25]}
    assert sample["top"] == [[1, 2], [3, 4]]
    # a top-level array is written as the reference writes it (tolist, then json.dumps)
    array = np.array([1.5, 2.0])
    assert get_encoding("json").encode(array) == json.dumps(array.tolist()).encode()


def test_json_column_still_refuses_other_objects():
    with pytest.raises(TypeError, match="not JSON"):
        get_encoding("json").encode({"x": object()})


@pytest.mark.parametrize("limit", [1 << 32, "4gb", "5gb", (1 << 32) + 1])
def test_size_limit_of_4_gib_or_more_is_refused(tmp_path, limit):
    with pytest.raises(SizeLimitError, match="4 GiB") as info:
        MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int"}, size_limit=limit)
    assert isinstance(info.value, ValueError)  # what the reference raises
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("limit,message", [
    (0, "size_limit must be positive, got 0"), (-5, "size_limit: byte size must be non-negative"),
    ("lots", "size_limit: cannot parse byte size 'lots'"),
])
def test_size_limit_that_is_not_a_positive_size_is_refused(tmp_path, limit, message):
    with pytest.raises(SizeLimitError, match=re.escape(message)):
        MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int"}, size_limit=limit)
    assert not (tmp_path / "ds").exists()


def test_negative_max_workers_is_refused_before_the_folder_is_made(tmp_path):
    with pytest.raises(ArgumentError, match="max_workers must be at least 1, got -1"):
        MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int"}, max_workers=-1)
    assert not (tmp_path / "ds").exists()


def test_size_limit_just_below_4_gib_is_accepted(tmp_path):
    with MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int"},
                   size_limit=(1 << 32) - 1) as writer:
        writer.write({"a": 1})
        assert writer.get_config()["size_limit"] == (1 << 32) - 1


def test_get_config_is_the_shard_config(tmp_path):
    with MDSWriter(out=str(tmp_path / "ds"), columns={"b": "str", "a": "int"},
                   compression="zstd", hashes=["sha1"]) as writer:
        config = writer.get_config()
        writer.write({"a": 1, "b": "x"})
    assert config == {"column_encodings": ["int", "str"], "column_names": ["a", "b"],
                      "column_sizes": [8, None], "compression": "zstd", "format": "mds",
                      "hashes": ["sha1"], "size_limit": 1 << 26, "version": 2}
    entry = json.loads((tmp_path / "ds" / "index.json").read_text())["shards"][0]
    assert {k: entry[k] for k in config} == config
