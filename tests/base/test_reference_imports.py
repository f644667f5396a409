"""The reference implementation's import paths and registries work here (compatibility layer)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO


def test_reference_module_paths_are_our_objects():
    import streaming
    from streaming.base import LocalDataset, MDSWriter, Stream, StreamingDataLoader
    from streaming.base import StreamingDataset as BaseDataset
    from streaming.base.dataset import StreamingDataset
    from streaming.base.format import CSVWriter, JSONWriter, TSVWriter, XSVWriter
    from streaming.base.format.mds import MDSWriter as MDSWriter2
    from streaming.base.stream import Stream as Stream2
    from streaming.base.stream import streams_registry
    from streaming.base.util import clean_stale_shared_memory, merge_index

    assert StreamingDataset is BaseDataset is streaming.StreamingDataset
    assert MDSWriter is MDSWriter2 is streaming.MDSWriter
    assert Stream is Stream2 is streaming.Stream
    assert LocalDataset is streaming.LocalDataset
    assert StreamingDataLoader is streaming.StreamingDataLoader
    assert JSONWriter is streaming.JSONWriter and CSVWriter is streaming.CSVWriter
    assert TSVWriter is streaming.TSVWriter and XSVWriter is streaming.XSVWriter
    assert callable(clean_stale_shared_memory) and callable(merge_index)
    assert streams_registry.get("stream") is Stream


def test_base_import_stays_free_of_optional_frameworks():
    code = ("import sys, streaming.base, streaming.base.util, "
            "streaming.base.format.mds.encodings, streaming.base.stream, "
            "streaming.base.converters\n"
            "bad = [m for m in ('lightning', 'transformers', 'google.cloud', 'azure', 'pyspark')"
            " if m in sys.modules]\nassert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


def test_custom_encoding_registers_like_the_reference(tmp_path):
    from streaming import LocalDataset, MDSWriter, StreamingDataset
    from streaming.base.format.mds.encodings import (
        Encoding,
        _encodings,
        get_mds_encoded_size,
        is_mds_encoding,
        mds_decode,
        mds_encode,
    )

    class Complex(Encoding):
        size = 16

        def encode(self, obj):
            return np.complex128(obj).tobytes()

        def decode(self, data):
            assert isinstance(data, bytes)
            return complex(np.frombuffer(data, np.complex128)[0])

    class Upper(Encoding):
        def encode(self, obj):
            return obj.upper().encode()

        def decode(self, data):
            return data.decode().lower()

    assert not is_mds_encoding("complex_test")
    _encodings["complex_test"] = Complex
    _encodings["upper_test"] = Upper
    assert is_mds_encoding("complex_test") and get_mds_encoded_size("complex_test") == 16
    assert mds_decode("upper_test", mds_encode("upper_test", "abc")) == "abc"
    with MDSWriter(out=str(tmp_path / "ds"),
                   columns={"z": "complex_test", "s": "upper_test"}) as writer:
        for i in range(5):
            writer.write({"z": complex(i, -i), "s": f"row{i}"})
    assert LocalDataset(tmp_path / "ds")[3] == {"s": "row3", "z": complex(3, -3)}
    ds = StreamingDataset(local=str(tmp_path / "ds"))
    try:
        assert [s["z"] for s in ds] == [complex(i, -i) for i in range(5)]
    finally:
        ds.close()


def test_builtin_encodings_are_listed():
    from streaming.base.format.mds.encodings import _encodings, get_mds_encodings

    assert {"int", "str", "jpeg", "ndarray", "pkl", "json"} <= set(_encodings)
    assert "float32" in get_mds_encodings()
    with pytest.raises(ValueError):
        _encodings["bad"] = 3


def test_streams_registry_register_and_get(tmp_path):
    from streaming import MDSWriter, Stream, StreamingDataset
    from streaming.base.stream import streams_registry

    class Tagged(Stream):
        pass

    streams_registry.register("tagged_test", func=Tagged)
    assert streams_registry.get("tagged_test") is Tagged and "tagged_test" in streams_registry

    @streams_registry.register("decorated_test")
    class Decorated(Stream):
        pass

    assert streams_registry.get_all()["decorated_test"] is Decorated
    with MDSWriter(out=str(tmp_path / "ds"), columns={"a": "int"}) as writer:
        writer.write({"a": 1})
    ds = StreamingDataset(local=str(tmp_path / "ds"), stream_name="tagged_test")
    try:
        assert type(ds.streams[0]) is Tagged
    finally:
        ds.close()
    with pytest.raises(ValueError, match="tagged_test"):
        streams_registry.get("nope")


def test_util_merge_index_both_signatures(tmp_path):
    from streaming import LocalDataset, MDSWriter
    from streaming.base.util import bytes_to_int, merge_index, number_abbrev_to_int

    for part in ("p0", "p1"):
        with MDSWriter(out=str(tmp_path / part), columns={"a": "int"}) as writer:
            writer.write({"a": int(part[1])})
    merge_index([str(tmp_path / "p1" / "index.json"), str(tmp_path / "p0" / "index.json")],
                str(tmp_path), keep_local=True)
    assert [s["a"] for s in LocalDataset(tmp_path)] == [1, 0]
    merge_index(str(tmp_path), True, 60)
    assert [s["a"] for s in LocalDataset(tmp_path)] == [0, 1]
    assert bytes_to_int("1kb") == 1024 and number_abbrev_to_int("2k") == 2000
