"""`convert(...)` reports where it wrote as strings, for a local folder and a bucket alike (a
local run gave a PosixPath and an S3 run a str)."""

from __future__ import annotations

from pathlib import Path

from writers.convert import convert


def test_a_local_result_names_its_folder_and_index_as_strings(tmp_path: Path) -> None:
    rows = [{"id": i, "text": f"row {i}"} for i in range(50)]
    result = convert(rows, tmp_path / "out", progress=False)
    assert type(result.out) is str and type(result.index) is str
    assert result.out == str(tmp_path / "out")
    assert result.index == str(tmp_path / "out" / "index.json") and Path(result.index).is_file()
