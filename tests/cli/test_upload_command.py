"""`streaming upload LOCAL URL` and the upload progress of `streaming convert IN s3://...`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.errors import IndexNotFoundError
from writers.upload_dataset import upload_dataset


def converted(cli, tmp_path: Path, n: int = 300) -> Path:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": f"row {i} " * 20}) + "\n"
                              for i in range(n)))
    out = tmp_path / "data"
    assert cli("convert", source, out, "--workers", "2", "--size-limit", "4kb", "-q").code == 0
    return out


def dataset_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*")
               if p.is_file() and not any(part.startswith(".") for part in
                                          p.relative_to(folder).parts))


def test_upload_publishes_a_converted_folder_and_refuses_to_overwrite(cli, s3_env, tmp_path):
    out = converted(cli, tmp_path)
    bucket = s3_env.make_bucket()
    ran = cli("upload", out, f"s3://{bucket}/corpus")
    assert ran.code == 0, ran.err
    assert f"to s3://{bucket}/corpus/index.json" in ran.out
    assert f"upload to s3://{bucket}/corpus" in ran.err  # the progress bar, on stderr
    ran = cli("inspect", f"s3://{bucket}/corpus")
    assert ran.code == 0 and "300" in ran.out
    again = cli("upload", out, f"s3://{bucket}/corpus")
    assert again.code == 2 and "--exist-ok" in again.err and "exist_ok" not in again.err
    assert cli("upload", out, f"s3://{bucket}/corpus", "--exist-ok", "-q").code == 0


def test_upload_counts_the_bytes_it_sent(cli, s3_env, tmp_path):
    out = converted(cli, tmp_path)
    bucket = s3_env.make_bucket()
    done = upload_dataset(out, f"s3://{bucket}/c", progress=False)
    assert done.bytes == dataset_bytes(out) and done.files > 3
    listed = s3_env.client().list_objects_v2(Bucket=bucket, Prefix="c/")["Contents"]
    assert sum(o["Size"] for o in listed) == done.bytes


def test_upload_refuses_an_incomplete_folder_before_sending_anything(cli, s3_env, tmp_path):
    out = converted(cli, tmp_path)
    shard = next(out.glob("part-00001/shard.*"))
    shard.unlink()
    bucket = s3_env.make_bucket()
    ran = cli("upload", out, f"s3://{bucket}/c")
    assert ran.code == 2 and "missing" in ran.err and shard.name in ran.err
    assert "Contents" not in s3_env.client().list_objects_v2(Bucket=bucket)
    with pytest.raises(IndexNotFoundError, match=r"index\.json"):
        upload_dataset(tmp_path, f"s3://{bucket}/c", progress=False)


def test_convert_to_s3_shows_the_upload(cli, s3_env, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"id": {i}}}\n' for i in range(100)))
    bucket = s3_env.make_bucket()
    ran = cli("convert", source, f"s3://{bucket}/x")
    assert ran.code == 0, ran.err
    assert f"upload to s3://{bucket}/x" in ran.err
