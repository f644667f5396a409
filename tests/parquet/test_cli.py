"""`streaming inspect` and `streaming validate` on Parquet files (`--format parquet`): the
summary comes from the footers alone, validation decodes every row group and names a bad one."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streaming.cli.main import main as cli_main
from tests.parquet.helpers import write_files


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    write_files(tmp_path / "pq", files=2, rows=200, row_group=50)
    return tmp_path / "pq"


def test_inspect_reads_the_footers_only(corpus: Path, capsys) -> None:
    assert cli_main(["inspect", str(corpus), "--format", "parquet", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "parquet" and info["files"] == 2
    assert info["shards"] == 8 and info["samples"] == 400
    assert info["columns"] == {"id": "int64", "text": "str", "tokens": "ndarray:int32",
                               "blob": "bytes",
                               "meta": "struct<a: int64, b: string>", "maybe": "int64"}
    assert cli_main(["inspect", str(corpus), "--format", "parquet", "--columns", "id"]) == 0
    assert "parquet      2 files" in capsys.readouterr().out


def test_validate_decodes_every_row_group(corpus: Path, capsys) -> None:
    assert cli_main(["validate", str(corpus), "--format", "parquet"]) == 0
    assert "OK: 8 row groups, 400 samples checked" in capsys.readouterr().out


def test_validate_names_a_bad_row_group(corpus: Path, capsys) -> None:
    path = corpus / "part-001.parquet"
    group = pq.read_metadata(path).row_group(1)
    start = min(group.column(c).data_page_offset for c in range(group.num_columns))
    data = bytearray(path.read_bytes())
    data[start:start + 64] = b"\x00" * 64
    path.write_bytes(bytes(data))
    assert cli_main(["validate", str(corpus), "--format", "parquet", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert list(report["bad"]) == ["part-001.parquet row group 1"]
    assert "ParquetFileError" in report["bad"]["part-001.parquet row group 1"]


def test_a_corrupt_footer_fails_naming_the_file(corpus: Path, capsys) -> None:
    (corpus / "part-001.parquet").write_bytes(b"PAR1 not a footer PAR1")
    assert cli_main(["inspect", str(corpus), "--format", "parquet"]) == 2  # bad input
    assert "part-001.parquet" in capsys.readouterr().err


@pytest.fixture
def s3_corpus(corpus: Path, s3_env) -> str:
    """The corpus's files in a fresh bucket of the test S3 server."""
    bucket = s3_env.make_bucket()
    for path in sorted(corpus.glob("*.parquet")):
        s3_env.client().put_object(Bucket=bucket, Key=f"pq/{path.name}",
                                   Body=path.read_bytes())
    return f"s3://{bucket}/pq"


def test_plan_predicts_the_egress_of_a_parquet_stream(s3_corpus: str, tmp_path: Path,
                                                      capsys) -> None:
    """`streaming plan` over the derived index in a Parquet stream's cache folder (with its
    remote) predicts the projected column chunks' bytes, which an epoch then downloads."""
    from streaming import StreamingDataset
    from streaming.stream import Stream

    cache = tmp_path / "cache"
    ds = StreamingDataset(streams=[Stream(remote=s3_corpus, local=cache, format="parquet",
                                          columns=["id", "tokens"])], batch_size=8)
    config = tmp_path / "plan.yaml"
    config.write_text(f"streams:\n  - local: {cache}\n    remote: {s3_corpus}\n"
                      "batch_size: 8\n")
    assert cli_main(["plan", str(config), "--epochs", "1", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)["egress_bytes"]
    list(ds)
    fetched = sum(p.stat().st_size for p in cache.glob("*.rg*"))
    assert predicted == fetched == int(ds.catalog.facts.raw_bytes.sum()) > 0
    assert ds.cache_stats().bytes_downloaded == predicted


def test_plan_reads_a_parquet_stream_from_its_footers(s3_corpus: str, tmp_path: Path,
                                                      capsys) -> None:
    """A config stream with `format: parquet` and `columns` is indexed from the files' footers
    (nothing cached where the config lies), and its predicted egress is the projected column
    chunks an epoch then fetches from the same files."""
    from streaming import StreamingDataset
    from streaming.stream import Stream

    config = tmp_path / "plan.yaml"
    config.write_text(f"streams:\n  - remote: {s3_corpus}\n    format: parquet\n"
                      "    columns: [id, tokens]\nbatch_size: 8\n")
    assert cli_main(["plan", str(config), "--epochs", "1", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)["egress_bytes"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml", "pq"]
    ds = StreamingDataset(streams=[Stream(remote=s3_corpus, local=tmp_path / "c",
                                          format="parquet", columns=["id", "tokens"])],
                          batch_size=8)
    list(ds)
    everything = int(ds.catalog.facts.raw_bytes.sum())
    assert predicted == everything > 0
    config.write_text(f"streams:\n  - remote: {s3_corpus}\n    format: parquet\n"
                      "batch_size: 8\n")
    assert cli_main(["plan", str(config), "--epochs", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["egress_bytes"] > predicted  # every column


def test_plan_predicts_no_egress_for_files_read_in_place(corpus: Path, tmp_path: Path,
                                                         capsys) -> None:
    """Parquet files on a filesystem are read where they lie, so the plan, like the dataset's
    cache counters, counts no download for them, with a cache_limit or without."""
    config = tmp_path / "plan.yaml"
    config.write_text(f"streams:\n  - remote: {corpus}\n    format: parquet\nbatch_size: 8\n")
    for limit in ([], ["--cache-limit", "1kb"]):
        assert cli_main(["plan", str(config), "--epochs", "1", "--json", *limit]) == 0
        assert json.loads(capsys.readouterr().out)["egress_bytes"] == 0


@pytest.mark.parametrize(("stream", "why"), [
    ("format: arrow", "format must be mds or parquet"),
    ("columns: [id]", "columns must be a list of column names, for a Parquet stream"),
    ("format: parquet\n    columns: id", "columns must be a list of column names"),
])
def test_plan_refuses_a_bad_format_or_columns(corpus: Path, tmp_path: Path, capsys,
                                              stream: str, why: str) -> None:
    config = tmp_path / "plan.yaml"
    config.write_text(f"streams:\n  - remote: {corpus}\n    {stream}\nbatch_size: 8\n")
    assert cli_main(["plan", str(config), "--json"]) != 0
    assert why in capsys.readouterr().err


def test_plan_fits_the_shuffle_to_the_decoded_room_as_the_dataset_does(
        s3_corpus: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """With fewer row groups kept decoded than the default block spans, `streaming plan`
    narrows the block as the dataset does, and predicts what the dataset's epoch downloads."""
    from streaming import StreamingDataset
    from streaming.format.parquet_decoded import DECODED_SETTING
    from streaming.stream import Stream

    cache = tmp_path / "cache"
    stream = Stream(remote=s3_corpus, local=cache, format="parquet", columns=["id", "tokens"])
    largest = max(s["decoded_bytes"] for s in json.loads(stream.index_file().read_bytes())
                  ["shards"])
    monkeypatch.setenv(DECODED_SETTING, str(12 * largest))
    ds = StreamingDataset(streams=[stream], batch_size=8, shuffle=True, cache_limit="10mb")
    config = tmp_path / "plan.yaml"
    config.write_text(f"streams:\n  - local: {cache}\n    remote: {s3_corpus}\n"
                      "batch_size: 8\nshuffle: true\ncache_limit: 10mb\n")
    assert cli_main(["plan", str(config), "--epochs", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    block = ds.config.shuffle_block_size
    assert block is not None and block < ds.num_samples
    assert report["shuffle_block_size"] == block
    assert sorted(int(s["id"]) for s in ds) == list(range(ds.num_samples))
    assert ds.cache_stats().bytes_downloaded == report["egress_bytes"] > 0
