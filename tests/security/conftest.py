"""Hostile-data tests: one small dataset published through each remote kind (a local folder,
`file://`, the loopback S3 server, an HTTP server), a canary tree outside `local` whose every
file is snapshotted before and after a run, and a reader that runs a whole epoch."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from streaming import StreamingDataset
from tests.support.canary import snapshot
from tests.support.datasets import write_ids
from tests.support.httpserver import http_server  # noqa: F401
from tests.support.s3server import s3_env, s3_server  # noqa: F401

KINDS = ["folder", "file", "s3", "http"]
SAMPLES = 40


@dataclass
class Tree:
    """tmp/canary (must never change), tmp/source (clean datasets), tmp/work/local (the
    cache), tmp/remote (what is published)."""

    root: Path
    canary: Path
    local: Path

    def before(self) -> dict[str, tuple[int, str]]:
        return snapshot(self.root, self.local)

    def assert_untouched(self, before: dict[str, tuple[int, str]]) -> None:
        after = snapshot(self.root, self.local)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"files outside local created, changed or removed: {changed}"


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    canary = tmp_path / "canary"
    (canary / "sub").mkdir(parents=True)
    for name in ("victim.txt", "shard.00000.mds", "shard.00000.mds.zstd", "index.json",
                 "sub/victim2.txt"):
        (canary / name).write_bytes(b"precious " * 40)
    (tmp_path / "work").mkdir()
    return Tree(tmp_path, canary, tmp_path / "work" / "local")


def clean_dataset(folder: Path, compression: str | None = "zstd") -> Path:
    """SAMPLES samples (id = sample index) in shards of a few hundred bytes, with xxh64."""
    return write_ids(folder, SAMPLES, size_limit=400, compression=compression,
                     hashes=["xxh64"])


Publish = Callable[[Path], str]


@pytest.fixture(params=KINDS)
def publish(request, tmp_path: Path) -> Publish:
    """`publish(folder)` -> the remote (path or URL) that serves `folder`'s files, for each
    remote kind."""
    kind = request.param

    def folder_remote(folder: Path) -> str:
        return str(folder)

    def file_remote(folder: Path) -> str:
        return "file://" + str(folder)

    def s3_remote(folder: Path) -> str:
        env = request.getfixturevalue("s3_env")
        bucket = env.make_bucket()
        _upload_tree(env.client(), bucket, "data", folder)
        return f"s3://{bucket}/data"

    def http_remote(folder: Path) -> str:
        server = request.getfixturevalue("http_server")
        name = uuid.uuid4().hex
        shutil.copytree(folder, server.root / name, symlinks=True)
        return f"{server.endpoint}/{name}"

    return {"folder": folder_remote, "file": file_remote, "s3": s3_remote,
            "http": http_remote}[kind]


def _upload_tree(client, bucket: str, prefix: str, folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")


def read_epoch(remote: str, local: Path, **options) -> list[int]:
    """The `id`s of one whole epoch (0 workers), in order."""
    options = {"batch_size": 4, "download_retry": 0, "download_timeout": 10, **options}
    ds = StreamingDataset(remote=remote, local=str(local), **options)
    try:
        return [int(s["id"]) for s in ds]
    finally:
        ds.close()


def edit_index(folder: Path, edit: Callable[[dict], None]) -> None:
    """Rewrite `folder/index.json` with `edit` applied to its document."""
    document = json.loads((folder / "index.json").read_text())
    edit(document)
    (folder / "index.json").write_text(json.dumps(document))

