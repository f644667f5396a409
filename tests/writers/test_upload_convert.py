"""convert(..., out="s3://...") and the writer's lengths side files on S3."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import OutputExistsError
from tests.writers.test_upload import COLUMNS, download, local_files, samples, write
from writers.convert import convert

pytestmark = pytest.mark.slow


def jsonl(path: Path, n: int) -> Path:
    rows = [{"id": i, "text": f"row {i} " * (i % 7 + 1)} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def tree(root: Path) -> dict[str, bytes]:
    """Every non-hidden file under root, by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")
    }


def test_convert_to_s3_publishes_the_same_dataset_as_a_local_run(s3_env, tmp_path):
    bucket, source = s3_env.make_bucket(), jsonl(tmp_path / "in.jsonl", 2000)
    options = {"workers": 2, "size_limit": 8192, "progress": False, "hashes": ["xxh64"]}
    result = convert(source, f"s3://{bucket}/conv", **options)
    assert result.out == f"s3://{bucket}/conv" and result.index == f"s3://{bucket}/conv/index.json"
    convert(source, tmp_path / "local", **options)
    remote = download(s3_env, bucket, "conv", tmp_path / "down")
    assert remote == tree(tmp_path / "local")  # parts, their indexes and the merged root index
    assert any(name.startswith("part-00001/") for name in remote)
    got = LocalDataset(tmp_path / "down")
    assert [got[i]["id"] for i in range(len(got))] == list(range(2000))

    with pytest.raises(OutputExistsError, match=re.escape(f"s3://{bucket}/conv/index.json")):
        convert(source, f"s3://{bucket}/conv", **options)


def test_convert_pair_keeps_the_local_conversion(s3_env, tmp_path):
    bucket, source = s3_env.make_bucket(), jsonl(tmp_path / "in.jsonl", 300)
    convert(source, (tmp_path / "local", f"s3://{bucket}/c"), progress=False, size_limit=4096)
    assert tree(tmp_path / "local") == download(s3_env, bucket, "c", tmp_path / "down")
    assert (tmp_path / "local" / ".convert-plan.json").is_file()  # resumable locally
    assert ".convert-plan.json" not in download(s3_env, bucket, "c", tmp_path / "again")


def test_lengths_side_files_are_uploaded_with_their_shards(s3_env, tmp_path):
    bucket, rows = s3_env.make_bucket(), samples(200)
    write(f"s3://{bucket}/len", rows, compression="zstd", lengths="tokens")
    write(tmp_path / "local", rows, compression="zstd", lengths="tokens")
    remote = download(s3_env, bucket, "len", tmp_path / "down")
    assert remote == local_files(tmp_path / "local")
    side = sorted(name for name in remote if name.endswith(".lengths"))
    shards = json.loads(remote["index.json"])["shards"]
    assert len(side) == len(shards) > 3
    lengths = np.concatenate([np.frombuffer(remote[name], "<u4") for name in side])
    assert lengths.tolist() == [len(r["tokens"]) for r in rows]
    assert set(COLUMNS) == set(LocalDataset(tmp_path / "down")[0])
