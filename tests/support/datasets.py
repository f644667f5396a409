"""Small MDS datasets written with MDSWriter, for any test folder: `write_ids` (an `id` and a
tiny payload per sample), `write_dataset` (compressible text and bytes, hashed), `upload_dir`
(a written folder into a bucket), and the fixtures `many_shards` and `ids_dataset` built on them
(tests/conftest.py makes them available everywhere), and `write_tokens` (token sequences of
random lengths, for packing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "blob": "bytes"}
MANY_SHARDS_SAMPLES = 6000
TOKEN_COLUMNS = {"tokens": "ndarray:int32", "id": "int"}


def write_ids(out: Path, n: int, *, start: int = 0, size_limit: int = 1 << 10,
              compression: str | None = None, hashes: list[str] | None = None) -> Path:
    """A dataset whose sample i has `id` = start + i and a small variable payload."""
    with MDSWriter(columns={"id": "int", "payload": "ndarray:int32"}, out=out,
                   size_limit=size_limit, compression=compression, hashes=hashes) as w:
        for i in range(n):
            w.write({"id": start + i, "payload": np.full(3, start + i, dtype=np.int32)})
    return out


def write_dataset(out: Path, samples: int, *, size_limit: int = 16_000,
                  compression: str | None = "zstd") -> None:
    """Compressible samples whose `id` column equals their global sample id."""
    rng = np.random.default_rng(0)
    with MDSWriter(columns=COLUMNS, out=str(out), compression=compression,
                   size_limit=size_limit, hashes=["xxh64", "sha1"]) as writer:
        for i in range(samples):
            words = " ".join(f"w{int(x)}" for x in rng.integers(0, 50, 40))
            writer.write({"id": i, "text": words, "blob": bytes(rng.integers(0, 4, 200,
                                                                           np.uint8))})


def write_tokens(out: Path, n: int, *, start: int = 0, max_len: int = 300, seed: int = 0,
                 lengths: object = "tokens", size_limit: int = 1 << 14,
                 compression: str | None = None, hashes: list[str] | None = None) -> np.ndarray:
    """Sample i holds `id` = start + i and `tokens` = [start + i] * L_i; returns the L_i."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_len + 1, n)
    with MDSWriter(columns=TOKEN_COLUMNS, out=out, size_limit=size_limit, lengths=lengths,
                   compression=compression, hashes=hashes) as writer:
        for i, size in enumerate(sizes.tolist()):
            writer.write({"id": start + i, "tokens": np.full(size, start + i, np.int32)})
    return sizes


def upload_dir(client, bucket: str, prefix: str, folder: Path) -> None:
    """Upload every file of `folder` (not its subfolders' contents) under `prefix` in `bucket`."""
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), bucket, f"{prefix}/{path.name}")


@pytest.fixture(scope="session")
def many_shards(tmp_path_factory) -> Path:
    """A zstd dataset of MANY_SHARDS_SAMPLES (~40 per shard, ~150 shards) that a cache_limit
    holds only part of; tests use its folder as a remote."""
    folder = tmp_path_factory.mktemp("many_shards")
    write_dataset(folder, MANY_SHARDS_SAMPLES, size_limit=12_000)
    return folder


@pytest.fixture
def ids_dataset(tmp_path: Path) -> Path:
    """A `write_ids` dataset of 300 samples in a fresh folder."""
    return write_ids(tmp_path / "src", 300)
