"""A `datasets.Dataset` of Python int lists gets the narrowest exact integer dtype."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.converted import read_samples
from writers.convert import convert

datasets = pytest.importorskip("datasets")


def encodings(out: Path) -> dict[str, str]:
    shard = json.loads((out / "index.json").read_text())["shards"][0]
    return dict(zip(shard["column_names"], shard["column_encodings"]))


def test_python_int_lists_take_the_narrowest_signed_dtype(tmp_path: Path):
    ds = datasets.Dataset.from_dict({
        "tokens": [[i, 50_000 + i, 7] for i in range(50)],       # token ids over 2**15
        "small": [[-3, i % 100] for i in range(50)],
        "nested": [[[1, 2], [3, -200]] for _ in range(50)],
        "wide": [[2**40, i] for i in range(50)],
    })
    assert ds.features["tokens"].feature.dtype == "int64"  # what datasets infers
    convert(ds, tmp_path / "out", progress=False)
    assert encodings(tmp_path / "out") == {
        "nested": "ndarray:int16", "small": "ndarray:int8", "tokens": "ndarray:int32",
        "wide": "ndarray:int64"}
    got = read_samples(tmp_path / "out")
    assert got[3]["tokens"] == ["int32", [3, 50_003, 7]]  # exact: every value fits
    # columns= still chooses (e.g. uint16 for a vocabulary under 65536).
    convert(ds, tmp_path / "u16", columns={"tokens": "ndarray:uint16"}, progress=False)
    assert encodings(tmp_path / "u16")["tokens"] == "ndarray:uint16"


def test_the_narrowing_sees_every_row_not_only_the_first(tmp_path: Path):
    rows = [[1, 2]] * 999 + [[1, 2**31]]  # the last row needs int64
    ds = datasets.Dataset.from_dict({"tokens": rows})
    convert(ds, tmp_path / "out", progress=False)
    assert encodings(tmp_path / "out")["tokens"] == "ndarray:int64"


def test_int_lists_go_into_a_chosen_unsigned_dtype_exactly_or_not_at_all(tmp_path: Path):
    from streaming.errors import EncodeError

    rows = [{"tokens": [1, 65_535]}, {"tokens": [2, 3]}]
    convert(rows, tmp_path / "ok", columns={"tokens": "ndarray:uint16"}, progress=False)
    assert read_samples(tmp_path / "ok")[0]["tokens"] == ["uint16", [1, 65_535]]
    with pytest.raises(EncodeError, match=r"row 2: column 'tokens'.*70000 does not fit uint16"):
        convert([*rows[:1], {"tokens": [70_000]}], tmp_path / "bad",
                columns={"tokens": "ndarray:uint16"}, progress=False)


def test_save_to_disk_folders_narrowed_apart_take_the_widest(tmp_path: Path):
    datasets.Dataset.from_dict({"tokens": [[1, 2]] * 5}).save_to_disk(str(tmp_path / "in/a"))
    datasets.Dataset.from_dict({"tokens": [[1, 70_000]] * 5}).save_to_disk(
        str(tmp_path / "in/b"))
    result = convert(tmp_path / "in", tmp_path / "out", progress=False)
    assert result.samples == 10 and encodings(tmp_path / "out")["tokens"] == "ndarray:int32"
    assert read_samples(tmp_path / "out")[-1]["tokens"] == ["int32", [1, 70_000]]
