"""End-to-end conversions from each input kind, read back through LocalDataset."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from streaming.errors import EncodeError, MissingExtraError
from tests.support.converted import read_samples
from writers.convert import convert, tokenize
from writers.convert.api import detect_format


def records(n: int = 300) -> list[dict]:
    return [
        {"id": i, "text": f"ligne {i} — ünïcode 😀" * (i % 4 + 1), "tokens": list(range(i % 9 + 1)),
         "score": i / 7, "meta": {"even": i % 2 == 0}}
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def expected_plain(rows: list[dict]) -> list[dict]:
    return [{**r, "tokens": ["int64", r["tokens"]]} for r in rows]


def test_jsonl_round_trip(tmp_path: Path):
    rows = records()
    result = convert(write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out", progress=False)
    assert result.samples == len(rows) and result.parts == 1
    assert read_samples(tmp_path / "out") == expected_plain(rows)
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    shard = index["shards"][0]
    assert shard["compression"] == "zstd"
    assert dict(zip(shard["column_names"], shard["column_encodings"])) == {
        "id": "int", "meta": "json", "score": "float64", "text": "str", "tokens": "ndarray:int64"}


def test_columns_override_and_drop(tmp_path: Path):
    rows = records(50)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    convert(src, tmp_path / "out", columns={"tokens": "ndarray:int32", "meta": None,
                                             "score": "float32"},
            compression=None, progress=False)
    got = read_samples(tmp_path / "out")
    assert "meta" not in got[0]
    assert [g["tokens"] for g in got] == [["int32", r["tokens"]] for r in rows]
    assert got[3]["score"] == pytest.approx(rows[3]["score"], rel=1e-6)


def test_csv_and_tsv_keep_text_and_parse_typed_columns(tmp_path: Path):
    rows = [[str(i), f'he said "hi, {i}"\nthen left', f"{i / 4}", "ç,é"] for i in range(200)]
    for fmt, delim in (("csv", ","), ("tsv", "\t")):
        path = tmp_path / f"in.{fmt}"
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, delimiter=delim)
            writer.writerow(["id", "text", "value", "note"])
            writer.writerows(rows)
        out = tmp_path / f"out-{fmt}"
        convert(path, out, columns={"id": "int", "value": "float64"}, progress=False)
        got = read_samples(out)
        assert [[str(g["id"]), g["text"], str(g["value"]), g["note"]] for g in got] == rows


def test_transform_filters_splits_and_tokenises(tmp_path: Path):
    rows = records(100)

    def explode(record):
        if record["id"] % 3 == 0:
            return None
        return [{"id": record["id"], "half": h} for h in (0, 1)]

    convert(rows, tmp_path / "a", transform=explode, progress=False)
    got = read_samples(tmp_path / "a")
    assert [(g["id"], g["half"]) for g in got] == [
        (r["id"], h) for r in rows if r["id"] % 3 for h in (0, 1)]

    tok = tokenize(lambda text: [ord(c) for c in text], keep=["id"])
    convert(rows, tmp_path / "b", transform=tok, progress=False)
    got = read_samples(tmp_path / "b")
    assert got[5] == {"id": 5, "length": len(rows[5]["text"]),
                      "tokens": ["int32", [ord(c) for c in rows[5]["text"]]]}


def test_generator_and_bad_transform(tmp_path: Path):
    convert((r for r in records(40)), tmp_path / "g", workers=2, progress=False)
    assert len(read_samples(tmp_path / "g")) == 40
    with pytest.raises(EncodeError, match="transform must return"):
        convert(records(3), tmp_path / "bad", transform=lambda r: "oops", progress=False)


def test_inference_error_names_column(tmp_path: Path):
    rows = [{"x": 1}, {"x": "one"}]
    with pytest.raises(EncodeError, match=r"column 'x'.*columns="):
        convert(rows, tmp_path / "out", progress=False)


def test_parquet_round_trip_by_row_groups(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    n = 1000
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "tokens": pa.array([list(range(i % 5 + 1)) for i in range(n)], pa.list_(pa.int32())),
        "text": [f"t{i}" for i in range(n)],
        "blob": [bytes([i % 256]) * 3 for i in range(n)],
    })
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=100)
    for workers in (1, 3):
        out = tmp_path / f"out{workers}"
        result = convert(path, out, workers=workers, progress=False)
        assert result.parts == workers
        got = read_samples(out)
        assert [g["id"] for g in got] == list(range(n))
        assert got[7]["tokens"] == ["int32", list(range(3))]
        assert got[7]["blob"] == bytes([7]) * 3


def test_parquet_needs_its_extra(tmp_path: Path, monkeypatch):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingExtraError, match=r"mds-streaming\[parquet\]"):
        convert(path, tmp_path / "out", progress=False)


def test_hugging_face_dataset(tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({
        "id": list(range(120)), "text": [f"row {i}" for i in range(120)],
        "ids": [np.arange(i % 4 + 1, dtype=np.int32) for i in range(120)],
    })
    assert detect_format(ds) == "hf"
    convert(ds, tmp_path / "mem", workers=2, progress=False)
    got = read_samples(tmp_path / "mem")
    assert [g["id"] for g in got] == list(range(120))
    assert got[2]["ids"] == ["int32", [0, 1, 2]]
    ds.save_to_disk(str(tmp_path / "saved"))
    assert detect_format(tmp_path / "saved") == "hf"
    convert(tmp_path / "saved", tmp_path / "disk", progress=False)
    assert read_samples(tmp_path / "disk") == got


def test_format_detection_errors(tmp_path: Path):
    with pytest.raises(ValueError, match="extension"):
        detect_format(tmp_path / "data.xyz")
    with pytest.raises(ValueError, match="unknown input format"):
        convert(records(2), tmp_path / "o", format="xml", progress=False)
