"""JSONL and CSV inputs: pieces cover the file exactly and always start at record starts."""

from __future__ import annotations

import csv
import io
import itertools
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.errors import FormatError
from writers.convert.csv import CsvSource
from writers.convert.jsonl import JsonlSource
from writers.convert.source import Cursor

FIELD = st.text(
    alphabet=st.sampled_from(list('ab ,"\n\r\té€😀') + ["\t"]), min_size=0, max_size=12
)


def all_records(source, count: int) -> list[dict]:
    pieces = source.pieces(count)
    assert pieces[0].start <= pieces[-1].stop
    for a, b in itertools.pairwise(pieces):
        assert a.stop == b.start  # contiguous, nothing skipped or read twice
    assert [p.index for p in pieces] == list(range(len(pieces)))
    records = []
    for piece in pieces:
        cursor = Cursor()
        records.extend(source.records(piece, cursor))
        assert cursor.done == piece.stop - piece.start
    return records


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(rows=st.lists(st.dictionaries(st.sampled_from("xyz"), FIELD), max_size=30),
       count=st.integers(1, 9))
def test_jsonl_pieces_cover_all_lines(tmp_path_factory, rows, count):
    path = tmp_path_factory.mktemp("j") / "a.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    assert all_records(JsonlSource(path), count) == rows


def test_jsonl_without_final_newline_and_blank_lines(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n   \n{"a": 3}')
    assert all_records(JsonlSource(path), 3) == [{"a": 1}, {"a": 2}, {"a": 3}]


@pytest.mark.parametrize(("text", "words"),
                         [('{"a": 1}\n{oops\n', "line 2, column 2"), ("[1]\n", "list")])
def test_jsonl_bad_lines_name_file_line_and_column(tmp_path: Path, text, words):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(FormatError, match=r"bad\.jsonl") as info:
        all_records(JsonlSource(path), 1)
    assert words in str(info.value)


def write_csv(path: Path, header: list[str], rows: list[list[str]], delimiter: str = ",") -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(rows=st.lists(st.lists(FIELD, min_size=3, max_size=3), max_size=25),
       count=st.integers(1, 8), tsv=st.booleans())
def test_csv_pieces_respect_quoted_newlines(tmp_path_factory, rows, count, tsv):
    path = tmp_path_factory.mktemp("c") / "a.csv"
    delimiter = "\t" if tsv else ","
    write_csv(path, ["x", "y", "z"], rows, delimiter)
    with open(path, newline="", encoding="utf-8") as handle:
        expected = [r for r in csv.DictReader(handle, delimiter=delimiter)]
    got = all_records(CsvSource(path, delimiter=delimiter), count)
    assert got == expected


def test_csv_awkward_file_and_stray_quotes(tmp_path: Path):
    path = tmp_path / "awkward.csv"
    rows = [["1", 'say "hi", then\nleave', "naïve, café"], ["2", "", "日本語"],
            ["3", "multi\r\nline\n\n", '""'], ["4", "plain", "x"]] * 20
    write_csv(path, ["id", "text", "note"], rows)
    got = all_records(CsvSource(path), 7)
    assert [[r["id"], r["text"], r["note"]] for r in got] == rows
    # A literal quote inside an unquoted field breaks quote parity: splitting must still be
    # exact, by parsing.
    stray = tmp_path / "stray.csv"
    stray.write_text("a,b\n" + "".join(f'{i},x"y\n{i},"p\nq"\n' for i in range(50)))
    with open(stray, newline="") as handle:
        expected = list(csv.DictReader(handle))
    assert all_records(CsvSource(stray), 6) == expected


def test_csv_bad_input(tmp_path: Path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(FormatError, match=r"empty\.csv"):
        CsvSource(empty)
    dup = tmp_path / "dup.csv"
    dup.write_text("a,a\n1,2\n")
    with pytest.raises(FormatError, match="unique"):
        CsvSource(dup)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n1,2\n3\n")
    with pytest.raises(FormatError, match="1 fields, the header has 2"):
        all_records(CsvSource(ragged), 1)
    with pytest.raises(FileNotFoundError, match=r"nope\.csv"):
        CsvSource(tmp_path / "nope.csv")


def test_csv_reads_like_dictreader_for_crlf(tmp_path: Path):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows([["a", "b"], ["1", "x\ny"], ["2", "z"]])
    path = tmp_path / "crlf.csv"
    path.write_bytes(buf.getvalue().encode())
    assert all_records(CsvSource(path), 2) == [{"a": "1", "b": "x\ny"}, {"a": "2", "b": "z"}]


@pytest.mark.parametrize("orjson", [True, False])
def test_jsonl_keeps_huge_ints_and_nan(tmp_path: Path, monkeypatch, orjson):
    if not orjson:
        monkeypatch.setitem(sys.modules, "orjson", None)
    path = tmp_path / "big.jsonl"
    path.write_text('{"a": 123456789012345678901234567890, "b": NaN, "c": [1, 2]}\n')
    (record,) = all_records(JsonlSource(path), 1)
    assert record["a"] == 123456789012345678901234567890 and isinstance(record["a"], int)
    assert record["b"] != record["b"] and record["c"] == [1, 2]
