"""Converter mistakes get errors that say where: file, line and column for bad JSON, file and
row for a value that does not fit its inferred column; big CSV fields and empty token lists are
handled; an existing output can be replaced with exist_ok (API and CLI); a bad worker count or
an input whose format cannot be told is refused naming what to pass."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streaming.cli.main import main as cli
from streaming.errors import ArgumentError, EncodeError, FormatError, OutputExistsError
from tests.support.converted import read_samples
from writers.convert import convert


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_malformed_jsonl_names_file_line_and_column(tmp_path, workers):
    lines = [json.dumps({"id": i, "text": "x" * 50}) for i in range(400)]
    lines[337] = '{"id": 337, "text": "abc",, }'
    src = _jsonl(tmp_path / "in.jsonl", lines)
    with pytest.raises(FormatError) as caught:
        convert(src, tmp_path / "out", progress=False, workers=workers)
    message = str(caught.value)
    assert str(src) in message
    assert re.search(r"line 338, column 27\b", message), message


def test_jsonl_line_that_is_not_an_object_names_its_line(tmp_path):
    src = _jsonl(tmp_path / "in.jsonl", ['{"id": 0}', '{"id": 1}', "[1, 2]"])
    with pytest.raises(FormatError, match=r"line 3\b.*list"):
        convert(src, tmp_path / "out", progress=False)


def test_value_that_does_not_fit_its_inferred_column_names_file_and_line(tmp_path):
    lines = [json.dumps({"id": i, "n": i}) for i in range(500)]
    lines[420] = json.dumps({"id": 420, "n": "not a number"})
    src = _jsonl(tmp_path / "in.jsonl", lines)
    with pytest.raises(EncodeError) as caught:
        convert(src, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert str(src) in message and "line 421" in message and "'n'" in message, message


def test_iterable_encode_failure_names_the_row(tmp_path):
    rows = [{"n": i} for i in range(300)] + [{"n": "x"}]
    with pytest.raises(EncodeError, match=r"row 301\b"):
        convert(rows, tmp_path / "out", progress=False)


def test_csv_fields_beyond_128_kib(tmp_path):
    big = "y" * (300 << 10)
    src = tmp_path / "in.csv"
    src.write_text(f"id,text\n1,{big}\n2,short\n")
    convert(src, tmp_path / "out", progress=False)
    assert [r["text"] for r in read_samples(tmp_path / "out")] == [big, "short"]


def test_empty_token_list_gets_a_clear_error(tmp_path):
    lines = [json.dumps({"tokens": list(range(i % 5 + 1))}) for i in range(300)]
    lines.append(json.dumps({"tokens": []}))
    src = _jsonl(tmp_path / "in.jsonl", lines)
    with pytest.raises(EncodeError) as caught:
        convert(src, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert "line 301" in message and "'tokens'" in message and "empty" in message, message
    assert "casting" not in message


def test_existing_local_output_is_replaced_with_exist_ok(tmp_path):
    first = _jsonl(tmp_path / "a.jsonl", [json.dumps({"id": i}) for i in range(10)])
    second = _jsonl(tmp_path / "b.jsonl", [json.dumps({"id": i, "v": "x"}) for i in range(5)])
    out = tmp_path / "out"
    convert(first, out, progress=False)
    with pytest.raises(OutputExistsError, match="exist_ok=True"):
        convert(second, out, progress=False)
    convert(second, out, progress=False, exist_ok=True)
    assert read_samples(out) == [{"id": i, "v": "x"} for i in range(5)]


def test_exist_ok_never_removes_foreign_files(tmp_path):
    src = _jsonl(tmp_path / "a.jsonl", [json.dumps({"id": i}) for i in range(10)])
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=r"notes\.txt"):
        convert(src, out, progress=False, exist_ok=True)
    assert (out / "notes.txt").read_text() == "mine"


def test_existing_remote_output_is_replaced_with_exist_ok(tmp_path):
    src = _jsonl(tmp_path / "a.jsonl", [json.dumps({"id": i}) for i in range(10)])
    remote = tmp_path / "remote"
    convert(src, (tmp_path / "l1", str(remote)), progress=False)
    with pytest.raises(OutputExistsError, match="exist_ok=True"):
        convert(src, (tmp_path / "l2", str(remote)), progress=False)
    convert(src, (tmp_path / "l3", str(remote)), progress=False, exist_ok=True)
    assert read_samples(remote) == [{"id": i} for i in range(10)]


def test_cli_exist_ok(tmp_path):
    first = _jsonl(tmp_path / "a.jsonl", [json.dumps({"id": i}) for i in range(10)])
    second = _jsonl(tmp_path / "b.jsonl", [json.dumps({"k": i}) for i in range(3)])
    out = tmp_path / "out"
    assert cli(["convert", str(first), str(out), "-q"]) == 0
    assert cli(["convert", str(second), str(out), "-q", "--exist-ok"]) == 0
    assert read_samples(out) == [{"k": i} for i in range(3)]


def test_exist_ok_refusing_foreign_files_keeps_the_earlier_dataset(tmp_path):
    first = _jsonl(tmp_path / "a.jsonl", [json.dumps({"id": i}) for i in range(10)])
    second = _jsonl(tmp_path / "b.jsonl", [json.dumps({"k": i}) for i in range(3)])
    out = tmp_path / "out"
    convert(first, out, progress=False)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=r"notes\.txt"):
        convert(second, out, progress=False, exist_ok=True)
    assert read_samples(out) == [{"id": i} for i in range(10)]  # refused: nothing was removed


def test_zero_workers_is_refused_before_anything_is_written(tmp_path):
    src = _jsonl(tmp_path / "in.jsonl", [json.dumps({"id": 1})])
    with pytest.raises(ArgumentError, match="workers must be at least 1, got 0"):
        convert(src, tmp_path / "out", progress=False, workers=0)
    assert not (tmp_path / "out").exists()


def test_a_folder_of_unknown_format_asks_for_format(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.bin").write_bytes(b"x")
    with pytest.raises(ArgumentError, match=r"cannot tell the format of the files in .*in from "
                                            r"their extensions; pass format="):
        convert(tmp_path / "in", tmp_path / "out", progress=False)
    with pytest.raises(ArgumentError, match=r"cannot tell the format of .*rows\.bin from its "
                                            r"extension; pass format="):
        convert(tmp_path / "in" / "rows.bin", tmp_path / "out", progress=False)
