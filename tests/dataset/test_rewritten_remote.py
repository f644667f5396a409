"""A remote rewritten in place during a run (same names, same sizes, new contents) is detected:
the index records an xxh64 digest by default and downloads are checked against it, so the run
stops with a typed error instead of mixing samples of both versions: HashMismatchError when
the sizes agree, StorageError naming the size when they do not (zstd shards)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.errors import HashMismatchError, StorageError
from tests.support.datasets import upload_dir
from writers.mds import MDSWriter

SAMPLES, NEW = 200, 100_000


def _write(out: Path, start: int, compression: str | None) -> None:
    """Fixed-size samples: both versions have the same shard names and sizes."""
    with MDSWriter(columns={"id": "int", "pad": "bytes"}, out=str(out), size_limit=1_000,
                   compression=compression) as writer:
        for i in range(SAMPLES):
            writer.write({"id": start + i, "pad": bytes(40)})


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_remote_rewritten_during_the_run_is_detected(s3_env, tmp_path, compression):
    _write(tmp_path / "v1", 0, compression)
    _write(tmp_path / "v2", NEW, compression)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", tmp_path / "v1")
    ds = StreamingDataset(remote=f"s3://{bucket}/ds", local=str(tmp_path / "cache"),
                          predownload=2, download_retry=0)
    seen: list[int] = []
    try:
        assert int(ds[0]["id"]) == 0  # the run has begun: the index and shard 0 are here
        upload_dir(s3_env.client(), bucket, "ds", tmp_path / "v2")  # a new version lands
        with pytest.raises((HashMismatchError, StorageError), match=r"shard\.\d+\.mds") as info:
            for sample in ds:
                seen.append(int(sample["id"]))
    finally:
        ds.close()
    assert len(seen) < SAMPLES
    if compression is None:
        assert isinstance(info.value, HashMismatchError)
    assert all(i < NEW for i in seen)  # not one sample of the new version
