"""`streaming convert` over folders and globs, its words, --lengths and --local, as users run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def parquet_folder(root: Path, files: int = 8, rows: int = 40) -> Path:
    root.mkdir()
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        tokens = [[i % 50 + 1] * (i % 7 + 1) for i in ids]
        pq.write_table(pa.table({"id": ids, "tokens": tokens}), root / f"part-{f:05d}.parquet")
    return root


def side_lengths(out: Path) -> tuple[dict, bytes]:
    index = json.loads((out / "index.json").read_text())
    spec = index["sample_lengths"]
    data = b"".join((out / entry["basename"]).read_bytes() for entry in spec["files"])
    return spec["column"], data


def test_a_folder_converts_with_two_workers_and_names_each_file(cli, tmp_path: Path):
    folder = parquet_folder(tmp_path / "data")
    ran = cli("convert", folder, tmp_path / "out", "--workers", "2")
    assert ran.code == 0, ran.err
    for f in range(8):
        assert f"part-{f:05d}.parquet  40 samples" in ran.out
    assert "wrote 320 samples from 8 files in 2 parts" in ran.out
    assert "files=8/8" in ran.err and "samples=320" in ran.err and "read=" in ran.err


def test_cli_errors_name_options_not_keywords(cli, tmp_path: Path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.bin").write_bytes(b"x")
    ran = cli("convert", tmp_path / "data", tmp_path / "out")
    assert ran.code == 2 and "--format" in ran.err and "format=" not in ran.err
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a.jsonl").write_text('{"id": 1, "text": "a"}\n')
    (tmp_path / "two" / "b.jsonl").write_text('{"id": 2, "body": "b"}\n')
    ran = cli("convert", tmp_path / "two", tmp_path / "out2")
    assert ran.code == 2 and "a.jsonl" in ran.err and "b.jsonl" in ran.err
    assert "--columns" in ran.err and "columns=" not in ran.err
    assert cli("convert", tmp_path / "two", tmp_path / "out2", "--columns",
               "body:drop,text:drop", "-q").code == 0


def test_rerun_into_an_existing_prefix_names_convert_and_its_flags(cli, s3_env, tmp_path: Path):
    (tmp_path / "a.jsonl").write_text('{"id": 1}\n')
    bucket = s3_env.make_bucket()
    assert cli("convert", tmp_path / "a.jsonl", f"s3://{bucket}/x", "-q").code == 0
    ran = cli("convert", tmp_path / "a.jsonl", f"s3://{bucket}/x", "-q")
    assert ran.code == 2, ran.err
    assert "MDSWriter" not in ran.err and "convert" in ran.err
    assert "--exist-ok" in ran.err and "--append" in ran.err and "exist_ok" not in ran.err


def test_help_states_the_default_compression(cli):
    ran = cli("convert", "--help")
    assert ran.code == 0 and "default zstd" in ran.out and "MDSWriter" in ran.out


def test_lengths_in_the_same_pass_match_the_lengths_command(cli, tmp_path: Path):
    folder = parquet_folder(tmp_path / "data", files=3)
    one, two = tmp_path / "one", tmp_path / "two"
    ran = cli("convert", folder, one, "--lengths", "tokens", "--size-limit", "1kb", "-q")
    assert ran.code == 0, ran.err
    assert cli("convert", folder, two, "--size-limit", "1kb", "-q").code == 0
    assert cli("lengths", two, "--column", "tokens").code == 0
    assert side_lengths(one) == side_lengths(two)
    ran = cli("convert", folder, tmp_path / "three", "--lengths", "nope", "-q")
    assert ran.code == 2 and "--lengths 'nope'" in ran.err


def test_local_and_remote_out_on_the_command_line(cli, s3_env, tmp_path: Path):
    (tmp_path / "a.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(20)))
    bucket = s3_env.make_bucket()
    ran = cli("convert", tmp_path / "a.jsonl", f"s3://{bucket}/y", "--local", tmp_path / "keep")
    assert ran.code == 0, ran.err
    assert (tmp_path / "keep" / "index.json").is_file()
    assert f"s3://{bucket}/y" in ran.out
    ran = cli("inspect", f"s3://{bucket}/y")
    assert ran.code == 0 and "20" in ran.out


def test_rerun_with_another_input_into_a_local_folder_names_the_flags(cli, tmp_path: Path):
    (tmp_path / "a.jsonl").write_text('{"id": 1}\n')
    (tmp_path / "b.jsonl").write_text('{"id": 2}\n')
    out = tmp_path / "out"
    assert cli("convert", tmp_path / "a.jsonl", out, "-q").code == 0
    ran = cli("convert", tmp_path / "b.jsonl", out, "-q")
    assert ran.code == 2 and "--append" in ran.err and "--exist-ok" in ran.err
    assert "mode=" not in ran.err and "exist_ok" not in ran.err
    assert cli("convert", tmp_path / "b.jsonl", out, "--append", "-q").code == 0
    assert cli("convert", tmp_path / "b.jsonl", out, "--overwrite", "-q").code == 0
    ran = cli("inspect", out, "--json")
    assert ran.code == 0 and ran.json()["samples"] == 1
