"""With the remote unreachable, a complete local copy of it is used (with a warning); an
incomplete one is not, and the error is the remote's."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.errors import StorageError
from tests.support.datasets import upload_dir, write_ids
from tests.support.epochs import read_ids
from tests.support.processes import free_port


def test_an_unreachable_remote_falls_back_to_a_complete_local_copy(s3_env, tmp_path: Path,
                                                                    monkeypatch, caplog) -> None:
    src = write_ids(tmp_path / "src", 120, compression="zstd", hashes=["sha1"])
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    remote, local = f"s3://{bucket}/ds", tmp_path / "cache"
    quick = {"download_retry": 0, "download_timeout": 5}
    assert read_ids(StreamingDataset(remote=remote, local=str(local), **quick)) == list(range(120))
    partial = tmp_path / "partial"
    ds = StreamingDataset(remote=remote, local=str(partial), **quick)
    ds[0]  # one shard only
    ds.close()

    monkeypatch.setenv("S3_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nobody there
    with caplog.at_level(logging.WARNING, logger="streaming"):
        ids = read_ids(StreamingDataset(remote=remote, local=str(local), **quick))
    assert ids == list(range(120))
    assert "cannot reach" in caplog.text and str(local) in caplog.text
    with pytest.raises(StorageError):
        StreamingDataset(remote=remote, local=str(partial), **quick)
    assert "lacks" in caplog.text
