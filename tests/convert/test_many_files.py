"""convert() over inputs of several files: folders, globs, lists and remote prefixes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

from streaming.errors import ColumnMismatchError, EncodeError, FormatError
from tests.support.converted import read_samples
from writers.convert import convert

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def parquet_folder(root: Path, files: int = 8, rows: int = 50, **write) -> Path:
    """`files` Parquet files named so that name order is not creation order."""
    root.mkdir(parents=True, exist_ok=True)
    for f in reversed(range(files)):
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table({"id": ids, "text": [f"row {i}" for i in ids]})
        pq.write_table(table, root / f"part-{f:05d}.parquet", **write)
    (root / "_SUCCESS").write_bytes(b"")
    (root / ".part-00000.parquet.crc").write_bytes(b"crc")
    return root


def ids(out: Path) -> list[int]:
    return [s["id"] for s in read_samples(out)]


def test_a_folder_of_parquet_files_spreads_over_two_workers_in_name_order(tmp_path):
    folder = parquet_folder(tmp_path / "in")
    result = convert(folder, tmp_path / "out", workers=2, progress=False)
    assert result.samples == 400 and ids(tmp_path / "out") == list(range(400))
    # Both workers had work: two parts, each holding half of the files.
    parts = sorted(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert [p.name for p in parts] == ["part-00000", "part-00001"]
    assert all(any(p.glob("shard.*")) for p in parts)
    assert result.file_samples == {str(folder / f"part-{f:05d}.parquet"): 50 for f in range(8)}


def test_a_glob_mixes_plain_gzip_and_zstd_json_lines_in_name_order(tmp_path):
    rows = [{"id": i, "text": f"t{i}"} for i in range(90)]
    (tmp_path / "a.jsonl").write_bytes(lines(rows[:30]))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(lines(rows[30:60])))
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines(rows[60:])))
    result = convert(str(tmp_path / "*.jsonl*"), tmp_path / "out", workers=2, progress=False)
    assert ids(tmp_path / "out") == list(range(90))
    assert list(result.file_samples.values()) == [30, 30, 30]


def test_a_list_keeps_its_order_and_csv_tsv_read_alike(tmp_path):
    (tmp_path / "z.csv").write_text("id,text\n1,one\n2,two\n")
    (tmp_path / "a.csv").write_text("id,text\n3,three\n")
    result = convert([tmp_path / "z.csv", tmp_path / "a.csv"], tmp_path / "out",
                     columns={"id": "int"}, progress=False)
    assert ids(tmp_path / "out") == [1, 2, 3] and result.samples == 3
    (tmp_path / "tsv").mkdir()
    (tmp_path / "tsv" / "x.tsv").write_text("id\ttext\n7\tseven\n")
    (tmp_path / "tsv" / "y.tsv").write_text("id\ttext\n8\teight\n")
    convert(tmp_path / "tsv", tmp_path / "out2", columns={"id": "int"}, progress=False)
    assert ids(tmp_path / "out2") == [7, 8]


def test_save_to_disk_folders_in_one_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    for k in range(2):
        datasets.Dataset.from_dict({"id": [k * 10 + i for i in range(10)]}).save_to_disk(
            str(tmp_path / "in" / f"split{k}"))
    result = convert(tmp_path / "in", tmp_path / "out", progress=False)
    assert result.samples == 20 and ids(tmp_path / "out") == list(range(20))


def test_one_parquet_file_of_one_row_group_still_splits_over_workers(tmp_path):
    table = pa.table({"id": list(range(3000)), "text": ["x"] * 3000})
    pq.write_table(table, tmp_path / "one.parquet")  # one row group
    assert pq.ParquetFile(tmp_path / "one.parquet").metadata.num_row_groups == 1
    result = convert(tmp_path / "one.parquet", tmp_path / "out", workers=2, progress=False)
    assert result.parts == 2 and ids(tmp_path / "out") == list(range(3000))


def test_a_rerun_reuses_finished_files(tmp_path):
    folder = parquet_folder(tmp_path / "in")
    out = tmp_path / "out"
    first = convert(folder, out, workers=4, progress=False)
    assert first.parts == 4
    # As if interrupted: one part unfinished, no root index.
    (out / "part-00002" / ".convert-done.json").unlink()
    (out / "index.json").unlink()
    again = convert(folder, out, workers=4, progress=False)
    assert again.skipped_parts == 3 and ids(out) == list(range(400))
    assert again.file_samples == first.file_samples


def test_files_with_different_columns_name_both_files_and_the_column(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(lines([{"id": 1, "text": "a"}]))
    (tmp_path / "in" / "b.jsonl").write_bytes(lines([{"id": 2, "body": "b"}]))
    with pytest.raises(ColumnMismatchError) as caught:
        convert(tmp_path / "in", tmp_path / "out", progress=False)
    message = str(caught.value)
    assert "a.jsonl" in message and "b.jsonl" in message and "'body'" in message
    assert caught.value.column == "body"
    # Choosing the columns settles it: drop one, keep the other as JSON.
    convert(tmp_path / "in", tmp_path / "out", columns={"body": None, "text": None},
            progress=False)
    assert ids(tmp_path / "out") == [1, 2]


def test_parquet_files_with_different_types_are_refused(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "in" / "a.parquet")
    pq.write_table(pa.table({"id": ["one"]}), tmp_path / "in" / "b.parquet")
    with pytest.raises(ColumnMismatchError, match=r"a.parquet has 'int'.*b.parquet has 'str'"):
        convert(tmp_path / "in", tmp_path / "out", progress=False)


def test_empty_files_are_skipped_and_counted(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(lines([{"id": 1}]))
    (tmp_path / "in" / "b.jsonl").write_bytes(b"")
    (tmp_path / "in" / "c.csv.jsonl").write_bytes(lines([{"id": 2}]))
    result = convert(tmp_path / "in", tmp_path / "out", progress=False)
    assert result.empty_files == [str(tmp_path / "in" / "b.jsonl")]
    assert ids(tmp_path / "out") == [1, 2]
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), tmp_path / "e.parquet")
    pq.write_table(pa.table({"id": [5]}), tmp_path / "f.parquet")
    result = convert(str(tmp_path / "*.parquet"), tmp_path / "out2", progress=False)
    assert result.empty_files == [str(tmp_path / "e.parquet")] and ids(tmp_path / "out2") == [5]


def test_errors_name_the_file_and_the_line_or_row_group(tmp_path):
    (tmp_path / "in").mkdir()
    for name in ("a", "b"):
        (tmp_path / "in" / f"{name}.jsonl").write_bytes(lines([{"id": i} for i in range(5)]))
    (tmp_path / "in" / "c.jsonl").write_bytes(lines([{"id": 0}, {"id": 1}]) + b"{oops\n")
    with pytest.raises(FormatError, match=r"c\.jsonl: line 3"):
        convert(tmp_path / "in", tmp_path / "out", progress=False)
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "pq" / "a.parquet")
    pq.write_table(pa.table({"id": list(range(200, 300))}), tmp_path / "pq" / "b.parquet",
                   row_group_size=40)
    with pytest.raises(EncodeError, match=r"b\.parquet: row 57 \(row group 1\)"):
        convert(tmp_path / "pq", tmp_path / "out2", columns={"id": "uint8"}, progress=False)


def test_a_remote_prefix_and_a_remote_glob(s3_env, tmp_path):
    bucket = s3_env.make_bucket()
    client = s3_env.client()
    for f in range(3):
        body = lines([{"id": f * 10 + i} for i in range(10)])
        client.put_object(Bucket=bucket, Key=f"raw/shard-{f}.jsonl", Body=body)
    client.put_object(Bucket=bucket, Key="raw/_SUCCESS", Body=b"")
    result = convert(f"s3://{bucket}/raw/", tmp_path / "out", workers=2, progress=False)
    assert ids(tmp_path / "out") == list(range(30))
    assert list(result.file_samples) == [f"s3://{bucket}/raw/shard-{f}.jsonl" for f in range(3)]
    convert(f"s3://{bucket}/raw/shard-[12].jsonl", tmp_path / "out2", progress=False)
    assert ids(tmp_path / "out2") == list(range(10, 30))
    again = convert(f"s3://{bucket}/raw/", tmp_path / "out", workers=2, progress=False)
    assert again.skipped_parts == again.parts  # the listing's names and sizes match: reused


def test_http_files_by_url_and_an_http_prefix_asks_for_them(http_server, tmp_path):
    from streaming.errors import UnsupportedFeatureError

    folder = http_server.root / "corpus"
    folder.mkdir(exist_ok=True)
    for name, start in (("a", 0), ("b", 5)):
        (folder / f"{name}.jsonl").write_bytes(lines([{"id": start + i} for i in range(5)]))
    urls = [f"{http_server.endpoint}/corpus/{name}.jsonl" for name in ("a", "b")]
    result = convert(urls, tmp_path / "out", progress=False)
    assert ids(tmp_path / "out") == list(range(10)) and list(result.file_samples) == urls
    with pytest.raises(UnsupportedFeatureError, match="give the file URLs one by one"):
        convert(f"{http_server.endpoint}/corpus/", tmp_path / "out2", progress=False)


def test_an_input_that_cannot_split_for_every_worker_says_why(tmp_path, caplog):
    (tmp_path / "one.jsonl.gz").write_bytes(gzip.compress(lines([{"id": i} for i in range(9)])))
    with caplog.at_level("WARNING"):
        result = convert(tmp_path / "one.jsonl.gz", tmp_path / "out", workers=2, progress=False)
    assert result.parts == 1 and ids(tmp_path / "out") == list(range(9))
    assert "splits into only 1 part(s) for 2 workers" in caplog.text
