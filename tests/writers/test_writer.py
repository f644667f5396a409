"""MDSWriter: round trips, the flush rule, hashes, output directory handling, argument errors."""

from __future__ import annotations

import json
import struct
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import (
    EncodeError,
    FormatError,
    OutputExistsError,
    StorageError,
    UnknownEncodingError,
)
from streaming.format.hashing import file_hexdigest
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader
from writers.mds import MDSWriter
from writers.shard_publish import config_json, shard_config

SCALARS = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
           "float16", "float32", "float64"]


def _sample(i: int, rng: np.random.Generator) -> dict:
    """One sample with a value for every non-image encoding (see COLUMNS)."""
    sample = {f"c_{name}": np.dtype(name).type(rng.integers(0, 100)) for name in SCALARS}
    sample.update(
        c_bytes=rng.bytes(int(rng.integers(0, 50))),
        c_str=f"sample {i} ü " * int(rng.integers(0, 4)),
        c_int=int(rng.integers(-(1 << 62), 1 << 62)),
        c_str_int=int(rng.integers(-1000, 1000)),
        c_str_float=float(rng.normal()),
        c_str_decimal=Decimal(f"{rng.integers(0, 10**6)}.{i:03d}"),
        c_json={"i": i, "tags": ["a"] * (i % 3), "none": None},
        c_pkl={"i": i, "set": {1, 2}},
        c_nd=rng.integers(0, 1000, (1 + i % 3, 2)).astype(np.uint16),
        c_ndt=rng.normal(size=1 + i % 7).astype(np.float32),
        c_nds=rng.integers(0, 9, (2, 3)).astype(np.int64),
    )
    return sample


COLUMNS = {f"c_{name}": name for name in SCALARS} | {
    "c_bytes": "bytes", "c_str": "str", "c_int": "int", "c_str_int": "str_int",
    "c_str_float": "str_float", "c_str_decimal": "str_decimal", "c_json": "json", "c_pkl": "pkl",
    "c_nd": "ndarray", "c_ndt": "ndarray:float32", "c_nds": "ndarray:int64:2,3",
}


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and np.array_equal(got[key], value), key
        elif isinstance(value, np.generic):
            assert got[key].dtype == value.dtype and got[key] == value, key
        else:
            assert got[key] == value and type(got[key]) is type(value), key


def _write(out: Path, samples, columns=COLUMNS, **kwargs) -> Path:
    with MDSWriter(columns=columns, out=out, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    return out


def _index(out: Path) -> dict:
    return json.loads((out / "index.json").read_text())


@pytest.mark.parametrize(
    "compression", [None, "zstd", "zstd:1", "gz:1", "bz2:1", "br:1", "snappy"]
)
def test_every_encoding_round_trips_with_every_codec(tmp_path: Path, compression: str | None):
    rng = np.random.default_rng(0)
    samples = [_sample(i, rng) for i in range(60)]
    out = _write(tmp_path / "ds", samples, compression=compression, size_limit=2048)
    ds = LocalDataset(out, allow_unsafe_types=True)
    assert len(ds) == 60 and ds.index.num_shards > 3
    for i, sample in enumerate(samples):
        _assert_same(ds[i], sample)
    shards = _index(out)["shards"]
    assert all(s["compression"] == compression for s in shards)
    assert all(s["column_names"] == sorted(COLUMNS) for s in shards)


def test_sample_layout_and_header_match_the_format(tmp_path: Path):
    out = _write(tmp_path / "ds", [{"a": b"xy", "b": 7}], {"b": "int", "a": "bytes"})
    raw = (out / "shard.00000.mds").read_bytes()
    shard = _index(out)["shards"][0]
    count, first, end = struct.unpack_from("<3I", raw)
    assert count == 1 and end == len(raw)
    config = {k: v for k, v in shard.items() if k not in ("raw_data", "samples", "zip_data")}
    assert raw[12:first] == config_json(config)  # sorted keys, reference separators
    assert raw[first:end] == struct.pack("<I", 2) + b"xy" + struct.pack("<q", 7)


def test_exact_fit_stays_in_one_shard(tmp_path: Path):
    columns = {"blob": "bytes"}
    sample = {"blob": b"x" * 300}
    per_sample = len(SampleCodec.from_columns(columns).encode(sample)) + 4
    # The header embeds size_limit; any 4-digit limit gives the same header length.
    header = 8 + len(config_json(shard_config(["blob"], ["bytes"], None, [], 1000)))
    limit = header + 3 * per_sample
    assert 1000 <= limit < 10000
    fit = _write(tmp_path / "fit", [sample] * 3, columns, size_limit=limit, hashes=[])
    assert [s["samples"] for s in _index(fit)["shards"]] == [3]
    assert _index(fit)["shards"][0]["raw_data"]["bytes"] == limit
    over = _write(tmp_path / "over", [sample] * 3, columns, size_limit=limit - 1, hashes=[])
    assert [s["samples"] for s in _index(over)["shards"]] == [2, 1]


def test_oversize_samples_get_their_own_shard(tmp_path: Path):
    columns = {"blob": "bytes", "id": "int"}
    sizes = [2000, 10, 10, 3000, 10]
    samples = [{"blob": b"z" * n, "id": i} for i, n in enumerate(sizes)]
    out = _write(tmp_path / "ds", samples, columns, size_limit="1kb")
    shards = _index(out)["shards"]
    # The very first sample is oversize: the reference writer first emits an empty shard.
    assert [s["samples"] for s in shards] == [0, 1, 2, 1, 1]
    assert all(s["size_limit"] == 1024 for s in shards)
    ds = LocalDataset(out)
    assert [ds[i]["id"] for i in range(len(ds))] == list(range(5))
    assert len(ShardReader(out / "shard.00000.mds")) == 0


def test_empty_dataset_writes_an_empty_index(tmp_path: Path):
    out = _write(tmp_path / "ds", [], {"a": "int"})
    assert _index(out) == {"shards": [], "version": 2}
    assert len(LocalDataset(out)) == 0


@given(
    sizes=st.lists(st.integers(0, 600), max_size=40),
    limit=st.integers(300, 1500),
)
def test_flush_rule_is_greedy_and_bounded(fresh_dir, sizes: list[int], limit: int):
    out = fresh_dir()
    columns = {"blob": "bytes"}
    samples = [{"blob": bytes([i % 256]) * n} for i, n in enumerate(sizes)]
    _write(out, samples, columns, size_limit=limit, exist_ok=True)
    shards = _index(out)["shards"]
    counts = [s["samples"] for s in shards]
    assert sum(counts) == len(sizes)
    header = shards[0]["raw_data"]["bytes"] - sum(
        n + 8 for n in sizes[: counts[0]]
    ) if shards else 0
    start = 0
    for shard, count in zip(shards, counts):
        raw = shard["raw_data"]["bytes"]
        assert raw == header + sum(n + 8 for n in sizes[start : start + count])
        assert raw <= limit or count <= 1
        nxt = start + count
        if nxt < len(sizes) and count:  # greedy: the next sample really did not fit
            assert raw + sizes[nxt] + 8 > limit
        start = nxt
    ds = LocalDataset(out)
    assert [len(ds[i]["blob"]) for i in range(len(ds))] == sizes


def test_hashes_are_recorded_for_raw_and_zip(tmp_path: Path):
    algos = ["md5", "sha256", "xxh64", "xxh3_128"]
    samples = [{"t": np.arange(i + 1, dtype=np.int32)} for i in range(50)]
    out = _write(tmp_path / "ds", samples, {"t": "ndarray:int32"}, compression="zstd",
                 hashes=algos, size_limit=1024)
    shards = _index(out)["shards"]
    assert len(shards) > 3
    for shard in shards:
        assert shard["hashes"] == algos
        zip_path = out / shard["zip_data"]["basename"]
        for algo in algos:
            assert shard["zip_data"]["hashes"][algo] == file_hexdigest(algo, zip_path)
    ds = LocalDataset(out, validate_hash="sha256")
    for shard in range(ds.index.num_shards):
        raw = ds.rows.prepare(shard)
        assert shards[shard]["raw_data"]["hashes"]["md5"] == file_hexdigest("md5", raw)


def test_exist_ok(tmp_path: Path):
    columns = {"i": "int"}
    out = _write(tmp_path / "ds", [{"i": i} for i in range(200)], columns, size_limit=512)
    assert len(_index(out)["shards"]) > 3
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(OutputExistsError, match="ds"):
        MDSWriter(columns=columns, out=out)
    _write(out, [{"i": 1}], columns, exist_ok=True)
    assert sorted(p.name for p in out.iterdir()) == ["index.json", "notes.txt", "shard.00000.mds"]
    assert LocalDataset(out)[0] == {"i": 1}
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputExistsError):
        MDSWriter(columns=columns, out=tmp_path / "file", exist_ok=True)


def test_bad_arguments_name_the_culprit(tmp_path: Path):
    with pytest.raises(StorageError, match="ftp://bucket/x"):
        MDSWriter(columns={"a": "int"}, out="ftp://bucket/x")
    with pytest.raises(UnknownEncodingError, match="nope"):
        MDSWriter(columns={"a": "nope"}, out=tmp_path / "a")
    with pytest.raises(ValueError, match="lz4"):
        MDSWriter(columns={"a": "int"}, out=tmp_path / "b", compression="lz4")
    with pytest.raises(FormatError, match="md7"):
        MDSWriter(columns={"a": "int"}, out=tmp_path / "c", hashes=["md7"])
    with pytest.raises(ValueError, match="size"):
        MDSWriter(columns={"a": "int"}, out=tmp_path / "d", size_limit="64 parsecs")
    with pytest.raises(TypeError, match="colour"):
        MDSWriter(columns={"a": "int"}, out=tmp_path / "e", colour="red")
    with MDSWriter(columns={"a": "int"}, out=tmp_path / "f") as writer, pytest.raises(
        EncodeError, match="'a'"
    ):
        writer.write({"b": 1})


def test_file_url_and_string_size_limit(tmp_path: Path):
    out = _write(f"file://{tmp_path / 'ds'}", [{"a": 1}], {"a": "int"}, size_limit="64mb")
    assert _index(Path(out.removeprefix("file://")))["shards"][0]["size_limit"] == 1 << 26


def test_write_after_finish_fails(tmp_path: Path):
    writer = MDSWriter(columns={"a": "int"}, out=tmp_path / "ds")
    writer.finish()
    writer.finish()  # idempotent
    with pytest.raises(Exception, match="already finished"):
        writer.write({"a": 1})


def test_progress_bar_and_single_worker(tmp_path: Path, capsys):
    out = _write(tmp_path / "ds", [{"a": i} for i in range(100)], {"a": "int"},
                 progress_bar=True, max_workers=1, size_limit=400)
    assert len(LocalDataset(out)) == 100


def test_image_encodings_round_trip(tmp_path: Path):
    image_module = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(1)

    def image(mode: str, w: int, h: int):
        channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
        pixels = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        return image_module.fromarray(pixels.squeeze(-1) if channels == 1 else pixels, mode)

    columns = {"pil": "pil", "png": "png", "jpeg": "jpeg", "jarr": "jpeg_array",
               "pils": "list[pil]", "pngs": "list[png]", "jpegs": "list[jpeg]"}
    samples = [
        {
            "pil": image("RGBA", 5 + i, 3), "png": image("L", 4, 4 + i),
            "jpeg": image("RGB", 8, 8), "jarr": [image("RGB", 8, 8)] * (1 + i % 2),
            "pils": [image("RGB", 2, 2), image("L", 3, 1)], "pngs": [image("RGB", 6, 2)],
            "jpegs": [image("L", 8, 8)] * (i % 3),
        }
        for i in range(6)
    ]
    out = _write(tmp_path / "ds", samples, columns, compression="zstd", size_limit=4096)
    ds = LocalDataset(out)
    for sample, got in zip(samples, ds):
        for key in ("pil", "png"):  # lossless
            assert got[key].mode == sample[key].mode
            assert got[key].tobytes() == sample[key].tobytes()
        for key in ("pils", "pngs"):
            assert [g.tobytes() for g in got[key]] == [s.tobytes() for s in sample[key]]
        assert got["jpeg"].size == sample["jpeg"].size  # lossy: shape and mode only
        assert [g.size for g in got["jarr"]] == [s.size for s in sample["jarr"]]
        assert [g.mode for g in got["jpegs"]] == [s.mode for s in sample["jpegs"]]
