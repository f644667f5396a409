"""MDSWriter straight to a remote (S3 on the loopback moto server, file://, plain paths)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import OutputExistsError, StorageError
from writers.mds import MDSWriter
from writers.upload import resolve_output, shard_files

pytestmark = pytest.mark.slow

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}


def samples(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"id": i, "text": f"sample {i} " * int(rng.integers(1, 20)),
         "tokens": rng.integers(0, 50_000, int(rng.integers(1, 64)), dtype=np.int32)}
        for i in range(n)
    ]


def write(out, rows: list[dict], **options) -> MDSWriter:
    options.setdefault("size_limit", 4096)
    with MDSWriter(columns=COLUMNS, out=out, **options) as writer:
        for row in rows:
            writer.write(row)
    return writer


def download(server, bucket: str, prefix: str, dest: Path) -> dict[str, bytes]:
    """Every object under prefix/ as {relative name: bytes}, also saved under dest."""
    client = server.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])
    found = {}
    for item in listed:
        name = item["Key"][len(prefix) + 1:]
        data = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
        found[name] = data
    return found


def local_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def assert_same_samples(got: LocalDataset, want: list[dict]) -> None:
    assert len(got) == len(want)
    for i, row in enumerate(want):
        sample = got[i]
        assert sample["id"] == row["id"] and sample["text"] == row["text"]
        np.testing.assert_array_equal(sample["tokens"], row["tokens"])


@pytest.mark.parametrize("compression", [None, "zstd", "gz:1"])
def test_s3_dataset_is_byte_identical_to_a_local_write(s3_env, tmp_path, compression):
    bucket, rows = s3_env.make_bucket(), samples(300)
    options = {"compression": compression, "hashes": ["sha1", "xxh64"]}
    writer = write(f"s3://{bucket}/data/train", rows, **options)
    write(tmp_path / "local", rows, **options)
    remote = download(s3_env, bucket, "data/train", tmp_path / "down")
    assert remote == local_files(tmp_path / "local")
    assert len(remote) > 5
    if compression:
        assert not any(name.endswith(".mds") for name in remote)  # only the compressed files
    assert not writer.directory.exists()  # the staging directory is gone
    assert_same_samples(LocalDataset(tmp_path / "down"), rows)


def test_pair_keeps_local_copy_and_keep_local_false_removes_it(s3_env, tmp_path):
    bucket, rows = s3_env.make_bucket(), samples(120)
    write((tmp_path / "kept", f"s3://{bucket}/a"), rows)
    remote = download(s3_env, bucket, "a", tmp_path / "down")
    assert remote == local_files(tmp_path / "kept")  # local copy kept, index.json included
    assert_same_samples(LocalDataset(tmp_path / "kept"), rows)

    write((tmp_path / "dropped", f"s3://{bucket}/b"), rows, keep_local=False)
    assert not (tmp_path / "dropped").exists()
    assert download(s3_env, bucket, "b", tmp_path / "down_b") == remote


def test_remote_only_with_keep_local_leaves_the_staging_copy(s3_env, tmp_path):
    bucket, rows = s3_env.make_bucket(), samples(50)
    writer = write(f"s3://{bucket}/kept", rows, keep_local=True)
    try:
        assert local_files(writer.directory) == download(s3_env, bucket, "kept", tmp_path)
    finally:
        for path in writer.directory.iterdir():
            path.unlink()
        writer.directory.rmdir()


def test_transient_faults_one_in_five_still_publish_identical_bytes(
    s3_env, fault_proxy, monkeypatch, tmp_path
):
    bucket, rows = s3_env.make_bucket(), samples(300, seed=1)
    proxy = fault_proxy(rate=0.2, seed=5, faults=("500", "503", "reset"),
                        methods=("PUT", "GET", "HEAD"))
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    write(f"s3://{bucket}/faulty", rows, compression="zstd", hashes=["xxh64"], retry=8)
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_env.endpoint)
    write(tmp_path / "clean", rows, compression="zstd", hashes=["xxh64"])
    assert sum(proxy.injected.values()) >= 3
    assert download(s3_env, bucket, "faulty", tmp_path / "down") == local_files(tmp_path / "clean")


def test_a_shard_that_never_uploads_fails_loudly_and_publishes_nothing(
    s3_env, fault_proxy, monkeypatch
):
    bucket = s3_env.make_bucket()
    proxy = fault_proxy(fail_keys=["shard.00002.mds"], fail_with="500")
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    url = f"s3://{bucket}/broken"
    writer = MDSWriter(columns=COLUMNS, out=url, size_limit=4096, retry=1)
    with pytest.raises(StorageError) as caught, writer:
        for row in samples(400):
            writer.write(row)
    message = str(caught.value)
    assert "shard.00002.mds" in message and f"{url}/shard.00002.mds" in message
    assert proxy.count("PUT", f"/{bucket}/broken/shard.00002.mds") == 2  # retried, then gave up
    keys = [o["Key"] for o in s3_env.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert "broken/index.json" not in keys
    assert not writer.directory.exists()


def test_exist_ok_on_s3(s3_env, tmp_path):
    bucket = s3_env.make_bucket()
    url = f"s3://{bucket}/ds"
    write(url, samples(300))
    before = download(s3_env, bucket, "ds", tmp_path / "before")
    with pytest.raises(OutputExistsError, match=re.escape(f"{url}/index.json")):
        MDSWriter(columns=COLUMNS, out=url)
    rows = samples(40, seed=9)
    write(url, rows, exist_ok=True)
    after = download(s3_env, bucket, "ds", tmp_path / "after")
    assert len(after) < len(before)  # the longer old dataset's extra shards were removed
    assert_same_samples(LocalDataset(tmp_path / "after"), rows)


def test_missing_bucket_is_named_before_any_write(s3_env):
    with pytest.raises(StorageError, match="no-such-bucket"):
        MDSWriter(columns=COLUMNS, out="s3://no-such-bucket/x")


@pytest.mark.parametrize("scheme", ["file://", ""])
def test_file_and_path_remotes_use_the_same_machinery(tmp_path, scheme):
    rows = samples(100)
    write((tmp_path / "local", f"{scheme}{tmp_path}/remote"), rows, compression="zstd")
    assert local_files(tmp_path / "remote") == local_files(tmp_path / "local")
    write(f"{scheme}{tmp_path}/direct", rows, compression="zstd")  # a local path: no staging
    assert local_files(tmp_path / "direct") == local_files(tmp_path / "local")
    with pytest.raises(OutputExistsError, match=r"index\.json"):
        MDSWriter(columns=COLUMNS, out=(tmp_path / "other", tmp_path / "remote"))


def test_every_file_a_shard_or_the_writer_leaves_is_uploaded(tmp_path):
    """Side files next to a shard go up with it; other files the writer made go before the
    index; hidden temporaries never go."""

    class SideFiles(MDSWriter):
        def _shard_written(self, entry):
            name = entry["raw_data"]["basename"]
            (self.directory / f"{name}.extra").write_bytes(name.encode())
            super()._shard_written(entry)

    writer = SideFiles(columns=COLUMNS, out=(tmp_path / "l", tmp_path / "r"), size_limit=4096)
    with writer:
        for row in samples(80):
            writer.write(row)
        (tmp_path / "l" / "summary.json").write_text("{}")
        (tmp_path / "l" / ".scratch.tmp").write_text("x")
    remote = sorted(p.name for p in (tmp_path / "r").iterdir())
    shards = json.loads((tmp_path / "r" / "index.json").read_text())["shards"]
    want = [s["raw_data"]["basename"] + suffix for s in shards for suffix in ("", ".extra")]
    assert remote == sorted([*want, "index.json", "summary.json"])


def test_shard_files_lists_a_shards_finished_files_only(tmp_path):
    for name in ("shard.00001.mds.zstd", "shard.00001.mds.lengths", "shard.00010.mds.zstd",
                 ".shard.00001.mds.123.tmp", "index.json"):
        (tmp_path / name).write_bytes(b"x")
    entry = {"raw_data": {"basename": "shard.00001.mds"}}
    assert [p.name for p in shard_files(tmp_path, entry)] == [
        "shard.00001.mds.lengths", "shard.00001.mds.zstd",
    ]


def test_resolve_output(tmp_path):
    plain = resolve_output(tmp_path / "a")
    assert plain.local == tmp_path / "a" and plain.remote is None
    assert resolve_output(f"file://{tmp_path}/a") == plain
    assert resolve_output((tmp_path / "a", None)) == plain
    assert resolve_output((tmp_path / "a", tmp_path / "a")).remote is None  # onto itself
    staged = resolve_output("s3://bucket/prefix/")
    assert staged.staging and staged.remote == "s3://bucket/prefix" and not staged.local.exists()
    assert resolve_output((None, "s3://bucket/p")).staging
    pair = resolve_output((tmp_path / "a", "s3://bucket/p"))
    assert pair.local == tmp_path / "a" and pair.remote == "s3://bucket/p" and not pair.staging
    with pytest.raises(StorageError, match="ftp://"):
        resolve_output((tmp_path, "ftp://host/x"))
    with pytest.raises(ValueError, match="local half"):
        resolve_output(("s3://bucket/a", "s3://bucket/b"))
    with pytest.raises(ValueError, match="pair"):
        resolve_output((tmp_path, "s3://b/x", "extra"))


def test_streaming_dataset_reads_what_the_writer_uploaded(s3_env, tmp_path):
    from streaming import StreamingDataset

    bucket, rows = s3_env.make_bucket(), samples(150, seed=3)
    write(f"s3://{bucket}/sd", rows, compression="zstd", hashes=["xxh64"])
    dataset = StreamingDataset(remote=f"s3://{bucket}/sd", local=str(tmp_path / "cache"),
                               shuffle=False, batch_size=1, validate_hash="xxh64")
    got = sorted((s for s in dataset), key=lambda s: s["id"])
    assert [s["text"] for s in got] == [r["text"] for r in rows]
    assert all(np.array_equal(s["tokens"], r["tokens"]) for s, r in zip(got, rows, strict=True))
