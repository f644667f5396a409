"""Every `streaming` subcommand, run as a subprocess: output, exit codes, error messages."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from streaming.cli.main import COMMANDS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_has_examples(cli, command):
    ran = cli(command, "--help")
    assert ran.code == 0
    assert "examples:" in ran.out and f"streaming {command}" in ran.out


def test_convert_inspect_validate(cli, corpus: Path, tmp_path: Path):
    out = tmp_path / "ds"
    ran = cli("convert", corpus, out, "--size-limit", "8kb", "--hashes", "xxh64,sha1",
              "--columns", "tokens:ndarray:int32")
    assert ran.code == 0, ran.err
    assert "wrote 600 samples" in ran.out
    assert "samples" in ran.err  # the progress bar (stderr) counts samples
    info = cli("inspect", out, "--json").json()
    assert info["samples"] == 600 and info["shards"] > 3
    assert info["columns"] == {"id": "int", "text": "str", "tokens": "ndarray:int32"}
    assert info["compression"] == {"zstd": info["shards"]} and info["hashes"] == ["sha1", "xxh64"]
    text = cli("inspect", out)
    assert text.code == 0 and "tokens  ndarray:int32" in text.out and "600" in text.out
    ok = cli("validate", out)
    assert ok.code == 0 and ok.out.strip().startswith("OK")


def test_quiet_parallel_csv_and_parts_summary(cli, tmp_path: Path):
    path = tmp_path / "t.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "text"])
        writer.writerows([i, f'a "quoted", multi\nline {i}'] for i in range(400))
    out = tmp_path / "csvds"
    ran = cli("convert", path, out, "--workers", "2", "--columns", "id:int", "-q",
              "--compression", "none")
    assert ran.code == 0, ran.err
    assert ran.out == "" and ran.err == ""
    info = cli("inspect", out, "--json").json()
    assert info["samples"] == 400 and set(info["parts"]) == {"part-00000", "part-00001"}
    assert info["compression"] == {"none": info["shards"]}
    assert "part-00001" in cli("inspect", out).out


def test_validate_reports_bad_shards(cli, corpus: Path, tmp_path: Path):
    out = tmp_path / "ds"
    assert cli("convert", corpus, out, "--size-limit", "8kb", "--compression", "none",
               "--hashes", "xxh64", "-q").code == 0
    shards = sorted(out.glob("part*/shard.*.mds"))
    flipped, cut = shards[1], shards[3]
    data = bytearray(flipped.read_bytes())
    data[-3] ^= 0xFF
    flipped.write_bytes(bytes(data))
    cut.write_bytes(cut.read_bytes()[:-10])
    ran = cli("validate", out)
    assert ran.code == 1
    bad = [line for line in ran.out.splitlines() if line.startswith("BAD")]
    assert len(bad) == 2
    assert flipped.name in bad[0] and "xxh64" in bad[0]
    assert cut.name in bad[1]
    assert "2 bad shard(s)" in ran.err
    report = cli("validate", out, "--json")
    assert report.code == 1 and len(report.json()["bad"]) == 2


def test_validate_decodes_every_sample(cli, reference_fixtures: Path, tmp_path: Path):
    for name in ("all_encodings", "llm_br", "merged", "oversize"):
        ran = cli("validate", reference_fixtures / name)
        assert ran.code == 0, (name, ran.out, ran.err)
    ran = cli("validate", reference_fixtures / "pickle")
    assert ran.code == 2 and "'pkl'" in ran.err
    assert cli("validate", reference_fixtures / "pickle", "--allow-unsafe-types").code == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["convert", "missing.jsonl", "out"], "missing.jsonl"),
        (["convert", "{corpus}", "out", "--columns", "tokens"], "name:encoding"),
        (["convert", "{corpus}", "out", "--size-limit", "lots"], "byte size"),
        (["convert", "{corpus}", "out", "--compression", "lzma"], "lzma"),
        (["inspect", "nowhere"], "index"),
        (["validate", "nowhere"], "index"),
        (["merge-index", "empty"], "no sub-dataset"),
        (["plan", "absent.yaml"], "absent.yaml"),
    ],
)
def test_user_errors_are_one_line_exit_2(cli, corpus: Path, tmp_path: Path, args, words):
    (tmp_path / "empty").mkdir()
    args = [a.replace("{corpus}", str(corpus)) for a in args]
    ran = cli(*args, cwd=tmp_path)
    assert ran.code == 2, (ran.out, ran.err)
    assert "Traceback" not in ran.err
    assert words in ran.err and ran.err.startswith(f"streaming {args[0]}: error:")


def test_merge_index_rebuilds_the_root_index(cli, corpus: Path, tmp_path: Path):
    out = tmp_path / "ds"
    assert cli("convert", corpus, out, "--workers", "2", "-q").code == 0
    original = (out / "index.json").read_bytes()
    (out / "index.json").unlink()
    ran = cli("merge-index", out)
    assert ran.code == 0 and "600 samples" in ran.out
    assert (out / "index.json").read_bytes() == original
    ran = cli("merge-index", out, out / "part-00001")
    assert ran.code == 0
    assert json.loads((out / "index.json").read_text())["shards"][0]["raw_data"][
        "basename"].startswith("part-00001/")


def test_cache_show_and_clear_only_marked_caches(cli, corpus: Path, tmp_path: Path):
    source = tmp_path / "source"
    assert cli("convert", corpus, source, "--size-limit", "8kb", "-q").code == 0
    count = len(list(source.rglob("shard.*")))
    shown = cli("cache", "show", source, "--json").json()
    assert shown["shard_files"] == count and not shown["cache_marker"]
    refused = cli("cache", "clear", source)
    assert refused.code == 2 and "refusing" in refused.err
    assert len(list(source.rglob("shard.*"))) == count

    cache = tmp_path / "cache"
    shutil.copytree(source, cache)
    (cache / ".streaming-cache").touch()
    ran = cli("cache", "clear", cache)
    assert ran.code == 0 and f"removed {count} shard files" in ran.out
    assert not list(cache.rglob("shard.*")) and (cache / "index.json").is_file()
    assert cli("cache", "show", cache, "--json").json()["shard_files"] == 0


def test_validate_reads_text_formats(cli, tmp_path: Path):
    """json/csv/tsv/xsv datasets written by the reference check out, raw and compressed, and a
    corrupt meta file is reported."""
    import shutil

    root = Path(__file__).resolve().parents[1] / "fixtures" / "reference-formats"
    for name in ("json_zstd_hashed", "csv_gz", "xsv_pipe"):
        ran = cli("validate", root / name)
        assert ran.code == 0, ran.out + ran.err
    shutil.copytree(root / "tsv_plain", tmp_path / "tsv")
    meta = tmp_path / "tsv" / "shard.00001.tsv.meta"
    meta.write_bytes(meta.read_bytes()[:-3])
    ran = cli("validate", tmp_path / "tsv")
    assert ran.code != 0 and "shard.00001.tsv" in ran.out
