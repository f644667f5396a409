"""`streaming convert --append` and convert(mode=...): a conversion grafted onto an existing
dataset under new part numbers, the combined index published last; locally and to S3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.errors import DatasetMismatchError
from tests.support.converted import read_samples


def jsonl(path: Path, start: int, n: int, **extra) -> Path:
    with open(path, "w") as handle:
        for i in range(start, start + n):
            handle.write(json.dumps({"id": i, "text": f"t{i}", **extra}) + "\n")
    return path


def test_cli_append_adds_parts_and_keeps_the_old_ones(cli, tmp_path: Path):
    out = tmp_path / "out"
    assert cli("convert", jsonl(tmp_path / "a.jsonl", 0, 50), out, "-q").code == 0
    old = {p: p.read_bytes() for p in (out / "part-00000").iterdir()}
    ran = cli("convert", jsonl(tmp_path / "b.jsonl", 50, 30), out, "--append", "-q")
    assert ran.code == 0, ran.err
    assert [s["id"] for s in read_samples(out)] == list(range(80))
    assert all(p.read_bytes() == data for p, data in old.items())
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["part-00000", "part-00001"]
    bad = cli("convert", jsonl(tmp_path / "c.jsonl", 0, 5, extra=1), out, "--append", "-q")
    assert bad.code != 0 and "column 'extra' only in the new shards" in bad.err
    assert [s["id"] for s in read_samples(out)] == list(range(80))


@pytest.mark.slow
def test_convert_append_and_overwrite_to_s3(s3_env, tmp_path: Path):
    from streaming.storage import fetch
    from writers.convert import convert

    bucket = s3_env.make_bucket()
    url = f"s3://{bucket}/conv"
    convert(jsonl(tmp_path / "a.jsonl", 0, 40), url, progress=False)
    result = convert(jsonl(tmp_path / "b.jsonl", 40, 20), url, progress=False, mode="append")
    assert result.index == f"{url}/index.json" and result.samples == 20

    def read_back(name: str) -> list[int]:
        keys = [o["Key"] for o in s3_env.client().list_objects_v2(Bucket=bucket)["Contents"]]
        for key in keys:
            fetch(f"s3://{bucket}/{key}", tmp_path / name / key.removeprefix("conv/"))
        return [s["id"] for s in read_samples(tmp_path / name)]

    assert read_back("one") == list(range(60))
    with pytest.raises(DatasetMismatchError, match="compression"):
        convert(jsonl(tmp_path / "c.jsonl", 0, 3), url, progress=False, compression=None,
                mode="append")
    convert(jsonl(tmp_path / "d.jsonl", 100, 5), url, progress=False, mode="overwrite")
    assert read_back("two") == list(range(100, 105))
